package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/torus-mpi/torus/launch/agent"
	"github.com/torus-mpi/torus/launch/cmdline"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// runAsMain makes the test binary torus-launch itself when a test runs it
// with this variable set.
const runAsMain = "TORUS_LAUNCH_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// torusLaunch is a command running torus-launch with args.
func torusLaunch(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), runAsMain+"=1")
	return cmd
}

// startAgent starts torus-launch's agent with the job's keys, written to
// dir, on a loopback port, its environment extended by env. It returns the
// agent, the rest of what it writes to stderr after the line that says
// where it listens, and that address.
func startAgent(t *testing.T, keys *mpi.SSHKeys, dir string, env ...string) (server *exec.Cmd, stderr *bufio.Reader, host, port string) {
	t.Helper()
	server = torusLaunch(t, cmdline.Agent{
		Listen:         "127.0.0.1:0",
		HostKey:        writeFile(t, dir, "host", keys.HostPrivate),
		AuthorizedKeys: writeFile(t, dir, "authorized_keys", keys.ClientPublic),
	}.Args()...)
	server.Env = append(server.Env, env...)
	pipe, err := server.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	stderr = bufio.NewReader(pipe)
	line, err := stderr.ReadString('\n')
	if err != nil {
		t.Fatalf("the agent said %q: %v", line, err)
	}
	_, addr, _ := strings.Cut(strings.TrimSpace(line), "listening on ")
	if host, port, err = net.SplitHostPort(addr); err != nil {
		t.Fatalf("the agent said %q", line)
	}
	return server, stderr, host, port
}

// runTorusLaunch runs cmd to its end: its output, its errors and its exit
// code.
func runTorusLaunch(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWaitThenRunsTheCommand: the launcher's wait ends once every host's
// agent proves it the job's, then the command runs in its place, with its
// own output and exit code; a wait that gives up says why even when quiet,
// and a command that is not there fails before any wait.
func TestWaitThenRunsTheCommand(t *testing.T) {
	keys, err := mpi.GenerateSSHKeys(rand.Reader, mpi.DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, _, _, port := startAgent(t, keys, dir)
	// A port nothing listens on: a worker whose agent has not started.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()

	writeFile(t, dir, "id", keys.ClientPrivate)
	writeFile(t, dir, "known_hosts", keys.HostPublic)
	hostfile := writeFile(t, dir, "hostfile", []byte("127.0.0.1 slots=2\n"))
	// The wait for an agent that answers ends when it has proved itself,
	// however long a loaded machine takes for that: its timeout is far
	// off. The wait for one that never answers gives up at its timeout,
	// which is what those cases check: a short one.
	const answers, givesUp = time.Minute, 300 * time.Millisecond
	for _, tc := range []struct {
		name    string
		port    string
		quiet   string
		command []string
		// wantOut and wantCode are the command's; wantErr, what the wait
		// says, and notErr what it must not.
		wantOut, wantErr, notErr string
		wantCode                 int
	}{
		{name: "the job's agent answers: the command runs with its output and exit code", port: port, quiet: "0s",
			command: []string{"/bin/sh", "-c", `echo "ran $0 with $TORUS_TEST"; exit 3`, "mpirun"}, wantOut: "ran mpirun with kept\n", wantCode: 3},
		{name: "a command found in PATH", port: port, quiet: "0s",
			command: []string{"sh", "-c", "echo found"}, wantOut: "found\n"},
		{name: "no agent: the wait gives up, saying so though quiet, and the command runs", port: closed, quiet: "1h",
			command: []string{"/bin/sh", "-c", "echo ran"}, wantOut: "ran\n", wantErr: "starting anyway", notErr: "torus: waiting for"},
		{name: "no agent, not quiet: the wait says what it waits for", port: closed, quiet: "0s",
			command: []string{"/bin/sh", "-c", "echo ran"}, wantOut: "ran\n", wantErr: "torus: waiting for 127.0.0.1: connect to host 127.0.0.1 port " + closed},
		{name: "a command that is not there fails at once", port: closed, quiet: "0s",
			command: []string{"no-such-launcher"}, wantCode: 1, wantErr: `torus-launch: the launcher's command: exec: "no-such-launcher": executable file not found in $PATH`, notErr: "waiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, err := strconv.Atoi(tc.port)
			if err != nil {
				t.Fatal(err)
			}
			quiet, err := time.ParseDuration(tc.quiet)
			if err != nil {
				t.Fatal(err)
			}
			timeout := givesUp
			if tc.port != closed {
				timeout = answers
			}
			cmd := torusLaunch(t, cmdline.WaitThenRun{
				Dir:     dir,
				Wait:    cmdline.Wait{Hostfile: hostfile, Port: port, Key: "id", KnownHosts: "known_hosts", Timeout: timeout},
				Quiet:   quiet,
				Command: tc.command,
			}.Args()...)
			cmd.Env = append(cmd.Env, "TORUS_TEST=kept")
			out, errOut, code := runTorusLaunch(t, cmd)
			if code != tc.wantCode || out != tc.wantOut {
				t.Errorf("exit %d, output %q; want %d, %q (stderr %q)", code, out, tc.wantCode, tc.wantOut, errOut)
			}
			if tc.wantErr == "" && errOut != "" {
				t.Errorf("stderr %q, want nothing", errOut)
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr %q, want %q", errOut, tc.wantErr)
			}
			if tc.notErr != "" && strings.Contains(errOut, tc.notErr) {
				t.Errorf("stderr %q says %q", errOut, tc.notErr)
			}
		})
	}
}

// TestSetupThenRunsTheCommand: a container whose image holds torus-launch
// sets itself up (keys linked, binary installed), then runs the command
// after "--" in its place, with its output and exit code; a setup that
// fails runs nothing.
func TestSetupThenRunsTheCommand(t *testing.T) {
	secret, dir, bin := t.TempDir(), filepath.Join(t.TempDir(), "ssh"), t.TempDir()
	writeFile(t, secret, "id", []byte("key"))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(bin, filepath.Base(self))
	check := `test "$(readlink ` + filepath.Join(dir, "id") + `)" = ` + filepath.Join(secret, "id") + ` && test -x ` + installed + ` && echo "set up, then $0"; exit 4`
	for _, tc := range []struct {
		name    string
		run     string
		command []string
		// wantOut, wantCode: the command's; wantErr, the setup's.
		wantOut, wantErr string
		wantCode         int
	}{
		{name: "the setup, then the command in its place", run: "0",
			command: []string{"sh", "-c", check, "agent"}, wantOut: "set up, then agent\n", wantCode: 4},
		{name: "a failed setup runs nothing", run: "",
			command: []string{"sh", "-c", "echo ran"}, wantCode: 1, wantErr: "torus-launch: reading the keys' run"},
		{name: "a command that is not there, after the setup", run: "0",
			command: []string{"no-such-agent"}, wantCode: 1, wantErr: `torus-launch: the command after the setup: exec: "no-such-agent": executable file not found in $PATH`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(filepath.Join(secret, "run"))
			if tc.run != "" {
				writeFile(t, secret, "run", []byte(tc.run))
			}
			cmd := torusLaunch(t, cmdline.Setup{
				SecretDir: secret, Dir: dir, RunKey: "run", NextPrefix: "next-", Run: "0", Link: true,
				Files:      []cmdline.File{{Key: "id", Name: "id", Mode: 0o600, Keyed: true}},
				InstallDir: bin,
				Command:    tc.command,
			}.Args()...)
			out, errOut, code := runTorusLaunch(t, cmd)
			if code != tc.wantCode || out != tc.wantOut {
				t.Errorf("exit %d, output %q; want %d, %q (stderr %q)", code, out, tc.wantCode, tc.wantOut, errOut)
			}
			if !strings.Contains(errOut, tc.wantErr) || (tc.wantErr == "" && errOut != "") {
				t.Errorf("stderr %q, want %q", errOut, tc.wantErr)
			}
		})
	}
}

// TestAgentStopsAsAPodIsStopped: the agent runs under an init of its own
// (as it does as a container's first process), which reaps the orphans its
// commands leave. SIGTERM reaches the commands at once and they have the
// time they take to write a checkpoint; the agent then exits
// ExitWorldLost, since its job lost this host, and the client notes the
// host lost. An agent stopped idle, as every worker is once its launcher
// has finished, exits 0: its pod never reads as an error.
func TestAgentStopsAsAPodIsStopped(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		keys, err := mpi.GenerateSSHKeys(rand.Reader, mpi.DefaultKeyAlgorithm, "test")
		if err != nil {
			t.Fatal(err)
		}
		server, stderr, _, _ := startAgent(t, keys, t.TempDir(), envAsInit+"=1")
		if err := server.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(stderr)
		if err := server.Wait(); err != nil {
			t.Errorf("the idle agent asked to stop exited with %v, want 0; it said %s", err, rest)
		}
	})
	t.Run("running a rank", agentStopsItsRanks)
}

func agentStopsItsRanks(t *testing.T) {
	keys, err := mpi.GenerateSSHKeys(rand.Reader, mpi.DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server, stderr, host, port := startAgent(t, keys, dir, envAsInit+"=1")
	client, err := agent.NewClient(writeFile(t, dir, "id", keys.ClientPrivate), writeFile(t, dir, "known_hosts", keys.HostPublic))
	if err != nil {
		t.Fatal(err)
	}
	if client.Port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	client.Stdout, client.Stderr = &out, &out
	client.LostHosts = t.TempDir()

	// A rank that leaves an orphan behind, which lives until the test
	// releases it, then runs until it is told to stop, and writes its
	// checkpoint when it is.
	checkpoint := filepath.Join(dir, "checkpoint")
	started := filepath.Join(dir, "started")
	release := filepath.Join(dir, "release")
	rank := `sh -c "sh -c 'while [ ! -e ` + release + ` ]; do sleep 0.05; done' &"; trap 'sleep 0.5; echo saved > ` + checkpoint + `; exit 0' TERM; touch ` + started + `; while :; do sleep 0.1; done`
	code := make(chan int, 1)
	go func() { code <- client.Run([]string{host, rank}) }()
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case c := <-code:
			t.Fatalf("the rank ended with %d before it was stopped: %s", c, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The orphan is the init's to reap: it is adopted once its parent has
	// gone, and gone, not a zombie, once it has exited.
	var orphans []string
	for deadline := time.Now().Add(30 * time.Second); len(orphans) == 0; time.Sleep(50 * time.Millisecond) {
		if orphans = children(t, server.Process.Pid, "S"); len(orphans) == 0 && time.Now().After(deadline) {
			t.Fatal("the rank's orphan was not adopted by the agent's init")
		}
	}
	if len(orphans) != 1 {
		t.Fatalf("the init's children: %v, want the rank's orphan alone", orphans)
	}
	writeFile(t, dir, "release", nil)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + orphans[0]); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphan %s was not reaped: zombies %v", orphans[0], children(t, server.Process.Pid, "Z"))
		}
	}

	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	var exit *exec.ExitError
	if err := server.Wait(); !errors.As(err, &exit) || exit.ExitCode() != cmdline.ExitWorldLost {
		t.Errorf("the agent asked to stop while its rank ran exited with %v, want %d; it said %s", err, cmdline.ExitWorldLost, rest)
	}
	if data, err := os.ReadFile(checkpoint); err != nil || string(data) != "saved\n" {
		t.Errorf("the rank wrote no checkpoint on SIGTERM (%q, %v); the agent said %s", data, err, rest)
	}
	if c := <-code; c != 128+int(syscall.SIGTERM) {
		t.Errorf("the rank's session ended with %d, want %d, as for a command stopped by SIGTERM: %s", c, 128+int(syscall.SIGTERM), out.String())
	}
	if lost, err := agent.LostHosts(client.LostHosts); err != nil || len(lost) != 1 || !strings.HasPrefix(lost[0], host+": its pod was stopped") {
		t.Errorf("the client noted %q (%v), want %s as stopped", lost, err, host)
	}
	if !strings.Contains(string(rest), "this host is lost to the job") {
		t.Errorf("the agent said %q, want it to say its job lost the host", rest)
	}
}

// children are the shells whose parent is pid and whose state is state
// (S: sleeping; Z: exited but not reaped): the agent, the init's other
// child, is no shell.
func children(t *testing.T, pid int, state string) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		comm := string(data[bytes.IndexByte(data, '(')+1 : bytes.LastIndexByte(data, ')')])
		fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(fields) > 1 && fields[0] == state && fields[1] == strconv.Itoa(pid) && comm == "sh" {
			out = append(out, string(data[:bytes.IndexByte(data, ' ')]))
		}
	}
	return out
}

// TestLauncherReportsALostWorld: the launcher's command runs under the
// wait, which exits ExitWorldLost when the command failed after a host was
// lost (its agent stopped the command, through the real client), or after
// the launcher was asked to stop; otherwise the command's own exit code,
// but for its own ExitWorldLost, which becomes 1.
func TestLauncherReportsALostWorld(t *testing.T) {
	keys, err := mpi.GenerateSSHKeys(rand.Reader, mpi.DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server, _, host, port := startAgent(t, keys, dir, envAsInit+"=1")
	portNumber, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "id", keys.ClientPrivate)
	writeFile(t, dir, "known_hosts", keys.HostPublic)
	hostfile := writeFile(t, dir, "hostfile", []byte(host+" slots=1\n"))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(dir, "started")
	for _, tc := range []struct {
		name string
		// command is mpirun's part: $0 is torus-launch, whose ssh it runs.
		command string
		// stop is who gets SIGTERM once the remote command started.
		stop     string
		wantCode int
		wantErr  string
	}{
		{name: "the program fails: its own exit code", command: `"$0" ssh ` + host + ` "exit 3"; exit 3`, wantCode: 3},
		{name: "the program exits 75 itself: 1", command: `exit 75`, wantCode: 1,
			wantErr: "torus-launch: sh exited 75, which Torus keeps for a job that lost a host; the launcher exits 1"},
		{name: "the launcher's pod stopped mid-run: the world is lost", stop: "launcher", wantCode: cmdline.ExitWorldLost,
			command: `trap 'exit 1' TERM; touch ` + started + `; while :; do sleep 0.1; done`,
			wantErr: "torus-launch: sh exited 1 after the launcher was asked to stop (SIGTERM)"},
		// Last: it stops the agent.
		{name: "a worker's pod stopped mid-run: the world is lost", stop: "agent", wantCode: cmdline.ExitWorldLost,
			command: `"$0" ssh ` + host + ` "touch ` + started + `; while :; do sleep 0.1; done"; echo "mpirun: a daemon died" >&2; exit 1`,
			wantErr: "torus-launch: sh exited 1 after the job lost " + host + ": its pod was stopped while it ran the job; the job restarts without counting against its restart budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(started)
			cmd := torusLaunch(t, cmdline.WaitThenRun{
				Dir:     dir,
				Wait:    cmdline.Wait{Hostfile: hostfile, Port: portNumber, Key: "id", KnownHosts: "known_hosts", Timeout: time.Minute},
				Command: []string{"sh", "-c", tc.command, self},
			}.Args()...)
			cmd.Env = append(cmd.Env, cmdline.EnvKey+"="+filepath.Join(dir, "id"),
				cmdline.EnvKnownHosts+"="+filepath.Join(dir, "known_hosts"), cmdline.EnvPort+"="+port)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if tc.stop != "" {
				for {
					if _, err := os.Stat(started); err == nil {
						break
					}
					select {
					case err := <-exited:
						t.Fatalf("the launcher ended (%v) before its command started: %s", err, out.String())
					case <-time.After(50 * time.Millisecond):
					}
				}
				stopped := cmd.Process
				if tc.stop == "agent" {
					stopped = server.Process
				}
				if err := stopped.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			err := <-exited
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || !strings.Contains(out.String(), tc.wantErr) {
				t.Errorf("exit %d, said %q; want %d, %q", code, out.String(), tc.wantCode, tc.wantErr)
			}
		})
	}
}

// Every field of the wait a command line asks for reaches the agent's wait:
// a field added to one and not copied fails here.
func TestAgentWaitTakesEveryField(t *testing.T) {
	w := cmdline.Wait{Hostfile: "/h", CallBack: "launcher", Port: 2222, Key: "id", KnownHosts: "kh",
		HostKeyOnly: true, ReadyFile: "/ready", Timeout: time.Minute}
	from, to := reflect.ValueOf(w), reflect.ValueOf(agentWait(w))
	for i := range from.NumField() {
		name := from.Type().Field(i).Name
		if from.Field(i).IsZero() {
			t.Fatalf("the test leaves cmdline.Wait.%s unset", name)
		}
		got := to.FieldByName(name)
		if !got.IsValid() || !reflect.DeepEqual(got.Interface(), from.Field(i).Interface()) {
			t.Errorf("agent.Wait.%s = %v, want cmdline.Wait.%s = %v", name, got, name, from.Field(i))
		}
	}
}
