// Command torus-launch is Torus's remote launch for MPI jobs, in place of
// OpenSSH: one static binary that Torus's image delivers into a job's pods.
//
//	torus-launch setup [flags]   first in every pod: the job's keys, the binary installed
//	torus-launch wait [flags] -- command...
//	                             on the launcher: waits for every worker's agent, then runs command in its place
//	torus-launch agent [flags]   on each worker: serves the launcher's and the daemons' remote commands
//	torus-ssh [ssh options] host command...
//	                             the ssh MPI launchers run (the same binary under its client name)
//
// The client reads its key, the job's known hosts and its default port from
// TORUS_SSH_KEY, TORUS_SSH_KNOWN_HOSTS and TORUS_SSH_PORT: launchers such as
// Hydra take a program's path alone.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/torus-mpi/torus/launch/agent"
)

func main() {
	if filepath.Base(os.Args[0]) == agent.SSHClientName {
		os.Exit(sshMain(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		fail("usage: torus-launch setup|wait|agent|ssh [flags]")
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "setup":
		err = setup(args)
	case "wait":
		var code int
		if code, err = waitThenRun(args); err == nil {
			os.Exit(code)
		}
	case "agent":
		if asInit() {
			os.Exit(runInit(os.Args[1:]))
		}
		var code int
		if code, err = serve(args); err == nil {
			os.Exit(code)
		}
	case "ssh":
		os.Exit(sshMain(args))
	default:
		err = fmt.Errorf("unknown command %q: use setup, wait, agent or ssh", cmd)
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "torus-launch:", msg)
	os.Exit(1)
}

func setup(args []string) error {
	fs := pflag.NewFlagSet("setup", pflag.ContinueOnError)
	s := agent.Setup{Log: os.Stderr}
	var run string
	var files, keyed []string
	var w agent.Wait
	fs.StringVar(&s.SecretDir, "secret", "", "where the job's SSH Secret is mounted")
	fs.StringVar(&s.Dir, "dir", "", "the SSH directory to fill")
	fs.StringVar(&s.RunKey, "run-key", "run", "the Secret's key holding the run its current keys are for")
	fs.StringVar(&s.NextPrefix, "next-prefix", "next-", "the prefix of the next run's keys")
	fs.StringVar(&run, "run", "", "this pod's run (the JobSet's restart attempt; empty is 0)")
	fs.StringSliceVar(&files, "file", nil, "KEY:NAME:MODE, a file to copy from the Secret")
	fs.StringSliceVar(&keyed, "keyed-file", nil, "KEY:NAME:MODE, a file to copy from the Secret in this run's generation")
	fs.StringVar(&s.InstallDir, "install", "", "a directory to install this binary into")
	fs.BoolVar(&s.Link, "link", false, "link the files to the Secret's rather than copy them (other containers mount the Secret too)")
	waitFlags(fs, &w)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.SecretDir == "" || s.Dir == "" {
		return errors.New("--secret and --dir are needed")
	}
	if run != "" {
		n, err := strconv.Atoi(run)
		if err != nil {
			return fmt.Errorf("--run=%q: want a number", run)
		}
		s.PodRun = n
	}
	for _, list := range []struct {
		specs []string
		keyed bool
	}{{files, false}, {keyed, true}} {
		for _, spec := range list.specs {
			f, err := parseFile(spec)
			if err != nil {
				return err
			}
			f.Keyed = list.keyed
			s.Files = append(s.Files, f)
		}
	}
	if w.Hostfile != "" {
		s.Wait = &w
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := s.Run(ctx)
	stop()
	if err != nil || fs.NArg() == 0 {
		return err
	}
	// A container whose image holds this binary sets itself up, then runs
	// the command after "--" in this process's place. It is looked up
	// after the setup, which may have installed it.
	if err := execCommand(fs.Args()); err != nil {
		return fmt.Errorf("the command after the setup: %w", err)
	}
	return nil
}

// execCommand replaces this process with command, found in PATH unless
// it names a path: the container's program keeps its process, its
// signals and its exit code.
func execCommand(command []string) error {
	prog, err := exec.LookPath(command[0])
	if err != nil {
		return err
	}
	if err := syscall.Exec(prog, command, os.Environ()); err != nil {
		return fmt.Errorf("running %s: %w", prog, err)
	}
	return nil
}

// waitFlags are the flags of the launcher's wait, in setup and wait.
func waitFlags(fs *pflag.FlagSet, w *agent.Wait) {
	fs.StringVar(&w.Hostfile, "wait-hostfile", "", "on the launcher: wait for the hosts of this hostfile")
	fs.StringVar(&w.CallBack, "wait-callback", "", "a name to wait for besides, the launcher's own")
	fs.IntVar(&w.Port, "wait-port", 2222, "the port the hosts' agents listen on")
	fs.StringVar(&w.Key, "wait-key", "", "the client key's name in the SSH directory")
	fs.StringVar(&w.KnownHosts, "wait-known-hosts", "known_hosts", "the known hosts' name in the SSH directory")
	fs.BoolVar(&w.HostKeyOnly, "wait-host-key-only", false, "end a host's wait at the job's host key, without logging in (OpenSSH's sshd)")
	fs.StringVar(&w.ReadyFile, "workers-ready", "", "a file that is empty until every worker is Ready: the wait is unbounded until then")
	fs.DurationVar(&w.Timeout, "ready-timeout", 30*time.Second, "how long to wait for the hosts once every worker is Ready (or from the start, without --workers-ready)")
}

// waitThenRun waits for the launcher's hosts, then runs the command after
// "--" under supervise (runLauncher), and returns the container's exit
// code.
func waitThenRun(args []string) (int, error) {
	fs := pflag.NewFlagSet("wait", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	var w agent.Wait
	dir := fs.String("dir", "", "the SSH directory holding the client key and known hosts")
	waitFlags(fs, &w)
	fs.DurationVar(&w.Quiet, "quiet-for", 0, "say nothing of what the wait waits for until it has lasted this long")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	command := fs.Args()
	if *dir == "" || w.Hostfile == "" || len(command) == 0 {
		return 0, errors.New("usage: torus-launch wait --dir=DIR --wait-hostfile=FILE [flags] -- command [args...]")
	}
	// Found before the wait: a command that is not there fails at once.
	prog, err := exec.LookPath(command[0])
	if err != nil {
		return 0, fmt.Errorf("the launcher's command: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err = w.Run(ctx, *dir, os.Stderr)
	stop()
	if err != nil {
		return 0, err
	}
	return runLauncher(prog, command)
}

// runLauncher runs the launcher's command and returns the container's exit
// code: the command's own, but for the loss of a host of its MPI world to
// something other than the program, which it reports as
// agent.ExitWorldLost. The command's clients note the hosts they
// lose (agent.EnvLostHosts); a launcher asked to stop while its
// command ran lost its world too. A command's own exit code
// ExitWorldLost becomes 1, so that only a lost world restarts a job
// without counting against its budget.
func runLauncher(prog string, command []string) (int, error) {
	if !canSupervise {
		return 0, execCommand(command)
	}
	lost, err := os.MkdirTemp("", "torus-lost-hosts-")
	if err != nil {
		log.Printf("torus-launch: no place to note lost hosts (%v): a host lost counts as the program's failure", err)
	} else {
		defer os.RemoveAll(lost)
	}
	cmd := exec.Command(prog, command[1:]...)
	cmd.Args[0] = command[0]
	cmd.Env = os.Environ()
	if lost != "" {
		cmd.Env = append(cmd.Env, agent.EnvLostHosts+"="+lost)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	code, terminated, err := supervise(cmd)
	if err != nil {
		return 0, fmt.Errorf("running %s: %w", prog, err)
	}
	if code == 0 {
		return 0, nil
	}
	var hosts []string
	if lost != "" {
		hosts, _ = agent.LostHosts(lost)
	}
	switch {
	case len(hosts) > 0:
		fmt.Fprintf(os.Stderr, "torus-launch: %s exited %d after the job lost %s; the job restarts without counting against its restart budget\n",
			command[0], code, strings.Join(hosts, "; "))
		return agent.ExitWorldLost, nil
	case terminated:
		fmt.Fprintf(os.Stderr, "torus-launch: %s exited %d after the launcher was asked to stop (SIGTERM)\n", command[0], code)
		return agent.ExitWorldLost, nil
	case code == agent.ExitWorldLost:
		fmt.Fprintf(os.Stderr, "torus-launch: %s exited %d, which Torus keeps for a job that lost a host; the launcher exits 1\n", command[0], code)
		return 1, nil
	}
	return code, nil
}

func parseFile(spec string) (agent.SetupFile, error) {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 {
		return agent.SetupFile{}, fmt.Errorf("--file %q: want KEY:NAME:MODE", spec)
	}
	mode, err := strconv.ParseUint(parts[2], 8, 32)
	if err != nil {
		return agent.SetupFile{}, fmt.Errorf("--file %q: mode %q is not octal", spec, parts[2])
	}
	return agent.SetupFile{Key: parts[0], Name: parts[1], Mode: os.FileMode(mode)}, nil
}

// serve serves the launcher's commands until its pod is stopped, and
// returns the agent's exit code: 0, or agent.ExitWorldLost when the
// stop cut short commands that were running.
func serve(args []string) (int, error) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	listen := fs.String("listen", ":2222", "address to listen on")
	hostKey := fs.String("host-key", "", "the job's host key (PEM private key file)")
	authorizedKeys := fs.String("authorized-keys", "", "the job's client public key (authorized_keys file)")
	grace := fs.Duration("kill-grace", agent.DefaultKillGrace, "time between SIGTERM and SIGKILL for a command whose client has gone")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	// The kubelet timestamps every line.
	log.SetFlags(0)
	log.SetPrefix("torus-launch agent: ")
	// Caught from the start: a pod stopped as it starts stops its agent
	// as any other does (below).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	key, err := os.ReadFile(*hostKey)
	if err != nil {
		return 0, fmt.Errorf("reading the host key: %w", err)
	}
	authorized, err := os.ReadFile(*authorizedKeys)
	if err != nil {
		return 0, fmt.Errorf("reading the authorized keys: %w", err)
	}
	s, err := agent.NewServer(key, authorized)
	if err != nil {
		return 0, err
	}
	s.KillGrace = *grace
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return 0, err
	}
	log.Printf("listening on %s", l.Addr())
	// A pod stopped (its job done, stopped, preempted or restarted) asks
	// with SIGTERM: the ranks get it at once and the pod's grace period to
	// write a checkpoint, after which the kubelet kills what is left. An
	// agent stopped idle, its launcher done, has done its work and exits
	// 0; one that stopped running commands says its job lost this host.
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	select {
	case err := <-served:
		return 0, err
	case <-ctx.Done():
	}
	log.Printf("stopping: the commands running get SIGTERM; waiting for them to exit")
	l.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		log.Print(err)
	}
	if s.Interrupted() {
		log.Printf("stopped the job's commands before they ended: exit %d, this host is lost to the job", agent.ExitWorldLost)
		return agent.ExitWorldLost, nil
	}
	log.Printf("stopped")
	return 0, nil
}

// sshMain runs an ssh command line and returns ssh's exit code. Its own
// options may come first, each as --name=value; ssh's are single letters.
func sshMain(args []string) int {
	opts := map[string]string{
		"key":         os.Getenv(agent.EnvKey),
		"known-hosts": os.Getenv(agent.EnvKnownHosts),
		"port":        os.Getenv(agent.EnvPort),
	}
	for len(args) > 0 && strings.HasPrefix(args[0], "--") && strings.Contains(args[0], "=") {
		name, value, _ := strings.Cut(args[0][2:], "=")
		if _, ok := opts[name]; !ok {
			return sshFail(fmt.Errorf("unknown option --%s", name))
		}
		opts[name] = value
		args = args[1:]
	}
	c, err := agent.NewClient(opts["key"], opts["known-hosts"])
	if err != nil {
		return sshFail(err)
	}
	if p := opts["port"]; p != "" {
		if c.Port, err = strconv.Atoi(p); err != nil {
			return sshFail(fmt.Errorf("bad port %q", p))
		}
	}
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.LostHosts = os.Getenv(agent.EnvLostHosts)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	c.Signals = sigs
	return c.Run(args)
}

func sshFail(err error) int {
	fmt.Fprintln(os.Stderr, "torus-ssh:", err)
	return agent.ExitFailure
}
