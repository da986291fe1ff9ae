package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/torus-mpi/torus/launch/cmdline"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// envTestClient makes the test binary run as torus-ssh does, so that tests
// can signal and kill a real client process and commands can call it.
const envTestClient = "TORUS_AGENT_TEST_CLIENT"

func TestMain(m *testing.M) {
	if os.Getenv(envTestClient) != "" {
		c, err := NewClient(os.Getenv(cmdline.EnvKey), os.Getenv(cmdline.EnvKnownHosts))
		if err != nil {
			fmt.Fprintln(os.Stderr, "torus-ssh:", err)
			os.Exit(ExitFailure)
		}
		c.Port, _ = strconv.Atoi(os.Getenv(cmdline.EnvPort))
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		c.Signals = sigs
		os.Exit(c.Run(os.Args[1:]))
	}
	retryDelay = 10 * time.Millisecond
	os.Exit(m.Run())
}

// waitTimeout bounds every wait for something the test caused.
const waitTimeout = 10 * time.Second

// killGrace is the servers' grace between SIGTERM and SIGKILL.
const killGrace = 200 * time.Millisecond

// job is a job's keys, as files, and a server using them.
type job struct {
	keys                    *mpi.SSHKeys
	keyFile, hostPublicFile string
	addr                    string
	port                    int
	log                     *syncBuffer
}

func newKeys(t *testing.T) *mpi.SSHKeys {
	t.Helper()
	keys, err := mpi.GenerateSSHKeys(rand.Reader, mpi.DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func tempFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startJob starts a server with fresh keys on a free loopback port.
func startJob(t *testing.T) *job {
	t.Helper()
	return startJobWith(t, nil)
}

// startJobWith starts a server as startJob does, set up by configure, if not
// nil, before it serves.
func startJobWith(t *testing.T, configure func(*Server)) *job {
	t.Helper()
	j := &job{keys: newKeys(t), log: &syncBuffer{}}
	j.keyFile = tempFile(t, "id_ed25519", j.keys.ClientPrivate)
	j.hostPublicFile = tempFile(t, "host.pub", j.keys.HostPublic)
	s, err := NewServer(j.keys.HostPrivate, j.keys.ClientPublic)
	if err != nil {
		t.Fatal(err)
	}
	s.KillGrace = killGrace
	s.Log = log.New(j.log, "", 0)
	if configure != nil {
		configure(s)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() { _ = s.Serve(l) }()
	j.addr = l.Addr().String()
	j.port = l.Addr().(*net.TCPAddr).Port
	return j
}

// client is the job's client, in this process.
func (j *job) client(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(j.keyFile, j.hostPublicFile)
	if err != nil {
		t.Fatal(err)
	}
	c.Port = j.port
	return c
}

// clientEnv is the environment of a client process of this job.
func (j *job) clientEnv() []string {
	return []string{envTestClient + "=1", cmdline.EnvKey + "=" + j.keyFile, cmdline.EnvKnownHosts + "=" + j.hostPublicFile, cmdline.EnvPort + "=" + strconv.Itoa(j.port)}
}

// clientCommand is a shell command running the job's client.
func (j *job) clientCommand(t *testing.T, args string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(j.clientEnv(), " ") + " " + exe + " " + args
}

// sshClient logs in with x/crypto's client, to make requests torus-ssh
// never makes.
func (j *job) sshClient(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", j.addr, j.sshConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sshConfig is x/crypto's client configuration with the job's keys.
func (j *job) sshConfig(t *testing.T) *ssh.ClientConfig {
	t.Helper()
	signer, err := ssh.ParsePrivateKey(j.keys.ClientPrivate)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey(j.keys.HostPublic)
	if err != nil {
		t.Fatal(err)
	}
	return &ssh.ClientConfig{
		User:            "mpi",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey),
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func run(c *Client, stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = strings.NewReader(stdin), &out, &errOut
	code = c.Run(args)
	return out.String(), errOut.String(), code
}

func TestRun(t *testing.T) {
	j := startJob(t)
	t.Setenv("TORUS_AGENT_VAR", "from the agent")
	for _, tc := range []struct {
		name           string
		stdin          string
		args           []string
		stdout, stderr string
		code           int
	}{
		{name: "stdout and stderr", args: []string{"-x", "127.0.0.1", "echo out; echo err >&2"}, stdout: "out\n", stderr: "err\n"},
		{name: "exit code", args: []string{"127.0.0.1", "exit 3"}, code: 3},
		{name: "stdin", stdin: "one\ntwo\n", args: []string{"127.0.0.1", "cat"}, stdout: "one\ntwo\n"},
		{name: "no stdin", stdin: "one\n", args: []string{"-n", "127.0.0.1", "cat"}},
		{name: "words", args: []string{"127.0.0.1", "printf", "'%s|'", "a b", `"c d"`}, stdout: "a|b|c d|"},
		{name: "Open MPI's PATH prefix", args: []string{"-x", "127.0.0.1", "   PATH=/opt/none:$PATH ; export PATH ;   echo", `"$PATH"`}, stdout: "/opt/none:" + os.Getenv("PATH") + "\n"},
		{name: "agent's environment", args: []string{"127.0.0.1", `echo "$TORUS_AGENT_VAR"`}, stdout: "from the agent\n"},
		{name: "remote SIGTERM", args: []string{"127.0.0.1", "kill -TERM $$"}, code: 128 + 15},
		{name: "remote SIGKILL", args: []string{"127.0.0.1", "kill -KILL $$"}, code: 128 + 9},
		{name: "port from -p", args: []string{"-p", strconv.Itoa(j.port), "-o", "StrictHostKeyChecking=no", "mpi@127.0.0.1", "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(j.client(t), tc.stdin, tc.args...)
			if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
				t.Errorf("Run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	j := startJob(t)
	other := newKeys(t)
	freePort := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}()
	for _, tc := range []struct {
		name   string
		client func(*Client)
		args   []string
		host   string
		// stderr is in the client's output; line, if set, begins one of
		// its lines: OpenSSH's words, which launchers pass on and
		// Torus's diagnosis reads.
		stderr, line string
	}{{
		name: "tampered host key",
		client: func(c *Client) {
			c.HostKeys, _ = ParseAuthorizedKeys(other.HostPublic)
		},
		stderr: "torus-ssh: 127.0.0.1:" + strconv.Itoa(j.port) + " presents ssh-ed25519 key",
		line:   "Host key verification failed.",
	}, {
		name: "foreign client key",
		client: func(c *Client) {
			c.Key, _ = ssh.ParsePrivateKey(other.ClientPrivate)
		},
		stderr: "@127.0.0.1: Permission denied (publickey).",
	}, {
		name: "nothing listening",
		args: []string{"-p", strconv.Itoa(freePort), "-o", "ConnectionAttempts=2"},
		line: fmt.Sprintf("torus-ssh: connect to host 127.0.0.1 port %d: Connection refused", freePort),
	}, {
		name: "a name that does not resolve",
		args: []string{"-o", "ConnectionAttempts=1"},
		host: "host.invalid",
		line: "torus-ssh: Could not resolve hostname host.invalid: ",
	}, {
		name: "signal while connecting",
		client: func(c *Client) {
			sigs := make(chan os.Signal, 1)
			sigs <- syscall.SIGTERM
			c.Signals = sigs
		},
		args:   []string{"-p", strconv.Itoa(freePort), "-o", "ConnectionAttempts=100000"},
		stderr: "interrupted by terminated",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := j.client(t)
			if tc.client != nil {
				tc.client(c)
			}
			host := tc.host
			if host == "" {
				host = "127.0.0.1"
			}
			_, stderr, code := run(c, "", append(tc.args, host, "echo ran")...)
			if code != ExitFailure || !strings.HasPrefix(stderr, "torus-ssh: ") || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("Run = %d, stderr %q; want %d and an error saying %q", code, stderr, ExitFailure, tc.stderr)
			}
			if tc.line != "" && !slices.ContainsFunc(strings.Split(stderr, "\n"), func(l string) bool { return strings.HasPrefix(l, tc.line) }) {
				t.Errorf("stderr %q has no line beginning %q", stderr, tc.line)
			}
		})
	}
	if !j.logSays("is not authorized") {
		t.Errorf("the server's log does not tell of the foreign key:\n%s", j.log)
	}
}

// TestRequests makes requests of the protocol directly: env is passed on;
// shells, terminals, subsystems and forwarding are refused.
func TestRequests(t *testing.T) {
	j := startJob(t)
	c := j.sshClient(t)

	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Setenv("TORUS_TEST_VAR", "a b"); err != nil {
		t.Fatalf("env request refused: %v", err)
	}
	if out, err := sess.Output(`printf %s "$TORUS_TEST_VAR"`); err != nil || string(out) != "a b" {
		t.Errorf("exec with env = %q, %v; want %q", out, err, "a b")
	}

	for name, request := range map[string]func(*ssh.Session) error{
		"shell": func(s *ssh.Session) error { return s.Shell() },
		"pty":   func(s *ssh.Session) error { return s.RequestPty("xterm", 24, 80, nil) },
		"sftp":  func(s *ssh.Session) error { return s.RequestSubsystem("sftp") },
		"x11": func(s *ssh.Session) error {
			ok, err := s.SendRequest("x11-req", true, ssh.Marshal(struct {
				Single         bool
				Protocol, Auth string
				Screen         uint32
			}{Protocol: "MIT-MAGIC-COOKIE-1", Auth: "00"}))
			if err == nil && ok {
				return nil
			}
			return fmt.Errorf("refused")
		},
	} {
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := request(sess); err == nil {
			t.Errorf("%s request accepted", name)
		}
		sess.Close()
	}
	if conn, err := c.Dial("tcp", j.addr); err == nil {
		conn.Close()
		t.Error("a direct-tcpip channel (ssh -L) was opened")
	}
	if l, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		l.Close()
		t.Error("a tcpip-forward request (ssh -R) was accepted")
	}
}

// clientProcess starts a client process of the job and returns it with the
// lines its remote command writes.
func clientProcess(t *testing.T, j *job, command string) (*exec.Cmd, <-chan string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-x", "127.0.0.1", command)
	cmd.Env = append(os.Environ(), j.clientEnv()...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// readPIDs reads n process IDs, each on a line, and checks that they run.
func readPIDs(t *testing.T, lines <-chan string, n int) []int {
	t.Helper()
	var pids []int
	timeout := time.After(waitTimeout)
	for len(pids) < n {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the remote command ended after writing %d of %d process IDs", len(pids), n)
			}
			pid, err := strconv.Atoi(l)
			if err != nil {
				t.Fatalf("the remote command wrote %q, not a process ID", l)
			}
			if !running(pid) {
				t.Fatalf("process %d does not run", pid)
			}
			pids = append(pids, pid)
		case <-timeout:
			t.Fatalf("the remote command wrote %d of %d process IDs in %s", len(pids), n, waitTimeout)
		}
	}
	return pids
}

// running tells whether a process exists and has not exited (a zombie
// waits only for its parent to reap it).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for _, pid := range pids {
		for running(pid) {
			if time.Now().After(deadline) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				t.Fatalf("process %d (%s) still runs %s after its client went", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), waitTimeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("the client did not exit in %s", waitTimeout)
	}
	return cmd.ProcessState.ExitCode()
}

// TestSignal sends the client SIGTERM, as mpirun does to its ssh children
// when a job is stopped: every process of the remote command gets it.
func TestSignal(t *testing.T) {
	j := startJob(t)
	cmd, lines := clientProcess(t, j, "sleep 1000 & echo $!; echo $$; wait")
	pids := readPIDs(t, lines, 2)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 128+15 {
		t.Errorf("the client exited %d, want %d (the remote shell killed by SIGTERM)", code, 128+15)
	}
	waitGone(t, pids)
}

// TestDisconnect kills the client: the server stops the whole process
// group, SIGKILL reaching what ignores SIGTERM.
func TestDisconnect(t *testing.T) {
	j := startJob(t)
	cmd, lines := clientProcess(t, j, "(trap '' TERM; exec sleep 1000) & echo $!; sleep 1000 & echo $!; echo $$; wait")
	pids := readPIDs(t, lines, 3)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	waitGone(t, pids)
}

// TestTree runs a command that reaches another host with the client, as
// Open MPI's daemons and Hydra's proxies launch in a tree; killing the
// first client stops the second host's command too.
func TestTree(t *testing.T) {
	first, second := startJob(t), startJob(t)
	c := first.client(t)
	stdout, stderr, code := run(c, "", "127.0.0.1", second.clientCommand(t, `-x 127.0.0.1 'echo second; exit 5'`))
	if code != 5 || stdout != "second\n" || stderr != "" {
		t.Errorf("two hops = %d, stdout %q, stderr %q; want 5, %q, nothing", code, stdout, stderr, "second\n")
	}

	cmd, lines := clientProcess(t, first, second.clientCommand(t, `127.0.0.1 'sleep 1000 & echo $!; wait'`))
	pids := readPIDs(t, lines, 1)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	waitGone(t, pids)
}

// TestOpenSSH drives the server with OpenSSH's client, the job's keys and
// a known_hosts file, to show the protocol is the one ssh speaks.
func TestOpenSSH(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("no OpenSSH client")
	}
	j := startJob(t)
	other := newKeys(t)
	knownHosts := func(key []byte) string {
		return tempFile(t, "known_hosts", fmt.Appendf(nil, "[127.0.0.1]:%d %s", j.port, key))
	}
	for _, tc := range []struct {
		name           string
		key            []byte
		hostKey        []byte
		stdin          string
		args           []string
		stdout, stderr string
		code           int
	}{
		{name: "env and exit code", args: []string{"-o", "SetEnv=TORUS_TEST_VAR=set", "echo $TORUS_TEST_VAR; echo err >&2; exit 4"}, stdout: "set\n", stderr: "err\n", code: 4},
		{name: "stdin", stdin: "in\n", args: []string{"cat"}, stdout: "in\n"},
		{name: "Open MPI's command", args: []string{"   PATH=/opt/none:$PATH ; export PATH ;   echo", `"$PATH"`, "-mca", `"env"`}, stdout: "/opt/none:" + os.Getenv("PATH") + " -mca env\n"},
		{name: "shell", args: nil, stderr: "shell request failed", code: 255},
		{name: "tampered host key", hostKey: other.HostPublic, args: []string{"true"}, stderr: "Host key verification failed", code: 255},
		{name: "foreign client key", key: other.ClientPrivate, args: []string{"true"}, stderr: "Permission denied", code: 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, hostKey := j.keys.ClientPrivate, j.keys.HostPublic
			if tc.key != nil {
				key = tc.key
			}
			if tc.hostKey != nil {
				hostKey = tc.hostKey
			}
			args := append([]string{"-F", "/dev/null", "-x", "-T", "-i", tempFile(t, "id_ed25519", key),
				"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
				"-o", "UserKnownHostsFile=" + knownHosts(hostKey), "-o", "GlobalKnownHostsFile=/dev/null",
				"-o", "LogLevel=ERROR", "-p", strconv.Itoa(j.port), "127.0.0.1"}, tc.args...)
			cmd := exec.Command(sshBin, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(tc.stdin), &stdout, &stderr
			cmd.WaitDelay = waitTimeout
			err := cmd.Run()
			if _, ok := err.(*exec.ExitError); err != nil && !ok {
				t.Fatal(err)
			}
			code := cmd.ProcessState.ExitCode()
			if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderr) || tc.stderr == "" && stderr.Len() > 0 {
				t.Errorf("ssh %q = %d, stdout %q, stderr %q; want %d, %q, stderr with %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestShutdown: a stopped agent passes SIGTERM on to every running
// command's process group and waits for them; a command that ignores it
// gets SIGKILL when the shutdown's time runs out; nothing starts after.
func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command string
		within  time.Duration
		wantErr bool
	}{
		{name: "commands that stop on SIGTERM are waited for", within: waitTimeout,
			command: `trap 'sleep 0.3; exit 0' TERM; echo $$; while :; do sleep 0.05; done`},
		{name: "commands that ignore SIGTERM are killed when the time runs out", within: 300 * time.Millisecond, wantErr: true,
			command: `trap '' TERM; echo $$; while :; do sleep 0.05; done`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *Server
			j := startJobWith(t, func(srv *Server) { s = srv })
			_, lines := clientProcess(t, j, tc.command)
			pids := readPIDs(t, lines, 1)
			ctx, cancel := context.WithTimeout(context.Background(), tc.within)
			defer cancel()
			err := s.Shutdown(ctx)
			if (err != nil) != tc.wantErr {
				t.Errorf("Shutdown = %v, want an error: %t", err, tc.wantErr)
			}
			if !tc.wantErr && running(pids[0]) {
				t.Errorf("Shutdown returned while the command %d still runs", pids[0])
			}
			waitGone(t, pids)
			if _, stderr, code := run(j.client(t), "", "127.0.0.1", "echo late"); code == 0 {
				t.Errorf("a command started after the shutdown (%q)", stderr)
			}
		})
	}
}

// A host that stops answering, as a dead node does, is given up after
// AliveCountMax unanswered asks and noted lost; one that answers keeps its
// command however long it runs.
func TestKeepAlive(t *testing.T) {
	j := startJob(t)
	// A proxy to the agent that, once frozen, swallows every byte both
	// ways, holding the connections open: a host gone silent.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var frozen atomic.Bool
	var mu sync.Mutex
	var conns []net.Conn
	// Closed, the agent sees its client gone and stops the command.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", j.addr)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if err != nil {
						dst.Close()
						return
					}
					if !frozen.Load() {
						_, _ = dst.Write(buf[:n])
					}
				}
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	proxyPort := l.Addr().(*net.TCPAddr).Port

	c := j.client(t)
	c.Port, c.AliveInterval, c.AliveCountMax, c.LostHosts = proxyPort, 50*time.Millisecond, 3, t.TempDir()
	if _, stderr, code := run(c, "", "127.0.0.1", "sleep 1"); code != 0 {
		t.Fatalf("a command outliving many asks, all answered, ended with %d: %s", code, stderr)
	}
	if lost, _ := LostHosts(c.LostHosts); len(lost) != 0 {
		t.Fatalf("a host that answered was noted lost: %q", lost)
	}

	time.AfterFunc(300*time.Millisecond, func() { frozen.Store(true) })
	start := time.Now()
	_, stderr, code := run(c, "", "127.0.0.1", "sleep 5")
	if code != ExitFailure || !strings.Contains(stderr, "no answer for 150ms") {
		t.Errorf("a silent host's command ended with %d, saying %q; want %d, no answer", code, stderr, ExitFailure)
	}
	if took := time.Since(start); took > waitTimeout {
		t.Errorf("the silent host was given up after %s", took)
	}
	if lost, err := LostHosts(c.LostHosts); err != nil || len(lost) != 1 || !strings.HasPrefix(lost[0], "127.0.0.1: the connection was lost while it ran the job (no answer for 150ms)") {
		t.Errorf("lost hosts %q (%v)", lost, err)
	}
}
