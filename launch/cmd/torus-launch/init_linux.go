package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// envInitChild marks the agent an init started, so that it does not start
// another.
const envInitChild = "TORUS_LAUNCH_INIT_CHILD"

// envAsInit makes the agent run under an init of its own even when it is
// not its container's first process (tests, a shared process namespace).
const envAsInit = "TORUS_LAUNCH_AS_INIT"

// asInit reports whether the agent starts under an init of its own: as
// its container's first process (PID 1), it is where the kernel reparents
// every orphan of the ranks, and the kernel ignores signals PID 1 has no
// handler for.
func asInit() bool {
	if os.Getenv(envInitChild) != "" {
		return false
	}
	return os.Getpid() == 1 || os.Getenv(envAsInit) != ""
}

// runInit runs torus-launch with args as its child and does what a
// container's init does (supervise), and exits as the child does.
func runInit(args []string) int {
	self, err := os.Executable()
	if err != nil {
		return initFail(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), envInitChild+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	code, _, err := supervise(cmd)
	if err != nil {
		return initFail(err)
	}
	return code
}

// canSupervise: supervise runs here.
const canSupervise = true

// supervise starts cmd and does what a container's init does until it
// exits: it forwards the signals it gets to cmd, and reaps every process
// that ends up its child (the orphans the ranks leave, which would
// otherwise stay zombies and hold their process group, so that the
// agent's shutdown would wait for them). It returns the status a shell
// would report for cmd, and whether SIGTERM, a pod's request to stop,
// came while cmd ran.
func supervise(cmd *exec.Cmd) (code int, terminated bool, err error) {
	// Orphans come here even when this is not PID 1.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 0, false, fmt.Errorf("becoming the reaper of orphans: %w", err)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, false, err
	}
	child := cmd.Process.Pid
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			terminated = terminated || sig == syscall.SIGTERM
			_ = syscall.Kill(child, sig.(syscall.Signal))
			continue
		}
		// Signals coalesce: reap every child that has exited.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == child {
				return exitCode(ws), terminated, nil
			}
		}
	}
	return 1, terminated, nil
}

// exitCode is the status a shell reports for a process that ended so.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func initFail(err error) int {
	fmt.Fprintln(os.Stderr, "torus-launch init:", err)
	return 1
}
