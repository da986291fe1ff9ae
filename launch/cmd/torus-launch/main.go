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

	"github.com/torus-mpi/torus/launch/agent"
	"github.com/torus-mpi/torus/launch/cmdline"
)

func main() {
	if filepath.Base(os.Args[0]) == cmdline.ClientName {
		os.Exit(sshMain(os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "ssh" {
		os.Exit(sshMain(os.Args[2:]))
	}
	if len(os.Args) < 2 {
		fail("usage: torus-launch setup|wait|agent|ssh [flags]")
	}
	cmd, err := cmdline.Parse(os.Args[1:])
	if err != nil {
		fail(err.Error())
	}
	var code int
	switch c := cmd.(type) {
	case cmdline.Setup:
		err = setup(c)
	case cmdline.WaitThenRun:
		code, err = waitThenRun(c)
	case cmdline.Agent:
		if asInit() {
			os.Exit(runInit(os.Args[1:]))
		}
		code, err = serve(c)
	default:
		err = fmt.Errorf("command %T has no runner", c)
	}
	if err != nil {
		fail(err.Error())
	}
	os.Exit(code)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "torus-launch:", msg)
	os.Exit(1)
}

func setup(c cmdline.Setup) error {
	s := agent.Setup{
		SecretDir:  c.SecretDir,
		Dir:        c.Dir,
		RunKey:     c.RunKey,
		NextPrefix: c.NextPrefix,
		Link:       c.Link,
		InstallDir: c.InstallDir,
		Log:        os.Stderr,
	}
	if c.Run != "" {
		// Parse has checked it is a number.
		s.PodRun, _ = strconv.Atoi(c.Run)
	}
	s.Files = c.Files
	if c.Wait != nil {
		w := agentWait(*c.Wait)
		s.Wait = &w
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := s.Run(ctx)
	stop()
	if err != nil || len(c.Command) == 0 {
		return err
	}
	// A container whose image holds this binary sets itself up, then runs
	// the command after "--" in this process's place. It is looked up
	// after the setup, which may have installed it.
	if err := execCommand(c.Command); err != nil {
		return fmt.Errorf("the command after the setup: %w", err)
	}
	return nil
}

// agentWait is the agent's wait for the hosts a command line asks for.
func agentWait(w cmdline.Wait) agent.Wait {
	return agent.Wait{
		Hostfile:    w.Hostfile,
		CallBack:    w.CallBack,
		Port:        w.Port,
		Key:         w.Key,
		KnownHosts:  w.KnownHosts,
		HostKeyOnly: w.HostKeyOnly,
		ReadyFile:   w.ReadyFile,
		Timeout:     w.Timeout,
	}
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

// waitThenRun waits for the launcher's hosts, then runs the command after
// "--" under supervise (runLauncher), and returns the container's exit
// code.
func waitThenRun(c cmdline.WaitThenRun) (int, error) {
	w := agentWait(c.Wait)
	w.Quiet = c.Quiet
	command := c.Command
	// Found before the wait: a command that is not there fails at once.
	prog, err := exec.LookPath(command[0])
	if err != nil {
		return 0, fmt.Errorf("the launcher's command: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err = w.Run(ctx, c.Dir, os.Stderr)
	stop()
	if err != nil {
		return 0, err
	}
	return runLauncher(prog, command)
}

// runLauncher runs the launcher's command and returns the container's exit
// code: the command's own, but for the loss of a host of its MPI world to
// something other than the program, which it reports as
// cmdline.ExitWorldLost. The command's clients note the hosts they
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
		return cmdline.ExitWorldLost, nil
	case terminated:
		fmt.Fprintf(os.Stderr, "torus-launch: %s exited %d after the launcher was asked to stop (SIGTERM)\n", command[0], code)
		return cmdline.ExitWorldLost, nil
	case code == cmdline.ExitWorldLost:
		fmt.Fprintf(os.Stderr, "torus-launch: %s exited %d, which Torus keeps for a job that lost a host; the launcher exits 1\n", command[0], code)
		return 1, nil
	}
	return code, nil
}

// serve serves the launcher's commands until its pod is stopped, and
// returns the agent's exit code: 0, or cmdline.ExitWorldLost when the
// stop cut short commands that were running.
func serve(c cmdline.Agent) (int, error) {
	// The kubelet timestamps every line.
	log.SetFlags(0)
	log.SetPrefix("torus-launch agent: ")
	// Caught from the start: a pod stopped as it starts stops its agent
	// as any other does (below).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	key, err := os.ReadFile(c.HostKey)
	if err != nil {
		return 0, fmt.Errorf("reading the host key: %w", err)
	}
	authorized, err := os.ReadFile(c.AuthorizedKeys)
	if err != nil {
		return 0, fmt.Errorf("reading the authorized keys: %w", err)
	}
	s, err := agent.NewServer(key, authorized)
	if err != nil {
		return 0, err
	}
	s.KillGrace = c.KillGrace
	l, err := net.Listen("tcp", c.Listen)
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
		log.Printf("stopped the job's commands before they ended: exit %d, this host is lost to the job", cmdline.ExitWorldLost)
		return cmdline.ExitWorldLost, nil
	}
	log.Printf("stopped")
	return 0, nil
}

// sshMain runs an ssh command line and returns ssh's exit code. Its own
// options may come first, each as --name=value; ssh's are single letters.
func sshMain(args []string) int {
	opts := map[string]string{
		"key":         os.Getenv(cmdline.EnvKey),
		"known-hosts": os.Getenv(cmdline.EnvKnownHosts),
		"port":        os.Getenv(cmdline.EnvPort),
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
