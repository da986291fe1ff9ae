package wire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
)

// errTimedOut marks a process the test killed because it ran too long, so
// that a hang is never mistaken for the failure a spec expects.
var errTimedOut = errors.New("timed out")

// command builds a process that dies together with its children when ctx
// ends: it leads its own process group and cancelling kills the group, so an
// mpirun that hangs cannot leave its ssh clients behind. A nil env inherits
// the test's environment.
func command(ctx context.Context, env []string, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Grandchildren that escaped the group may hold the output pipes open.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runFor runs a command to completion, for at most timeout, and returns its
// combined output.
func runFor(ctx context.Context, timeout time.Duration, env []string, argv ...string) (string, error) {
	return run(ctx, shortCommand(argv), timeout, env, argv...)
}

// run runs a command to completion, for at most timeout, and returns its
// combined output. what names the command in the log and in errors. The
// output also goes to GinkgoWriter, which shows it when a spec fails.
func run(ctx context.Context, what string, timeout time.Duration, env []string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := command(ctx, env, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	fmt.Fprintf(GinkgoWriter, "$ %s\n%s", what, out.String())
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return out.String(), fmt.Errorf("%s: %w after %s (%v)", what, errTimedOut, timeout, err)
	case err != nil:
		return out.String(), fmt.Errorf("%s: %w", what, err)
	}
	return out.String(), nil
}

// howItEnded says briefly how a failed command ended.
func howItEnded(err error) string {
	var exit *exec.ExitError
	switch {
	case errors.Is(err, errTimedOut):
		return "killed by the test's timeout"
	case errors.As(err, &exit):
		return exit.String()
	}
	return err.Error()
}

// shortCommand names a command in messages without the long generated
// scripts that pod commands carry.
func shortCommand(argv []string) string {
	parts := make([]string, 0, len(argv))
	for _, a := range argv {
		if strings.Contains(a, "\n") {
			a = "<script>"
		}
		parts = append(parts, a)
	}
	s := strings.Join(parts, " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// shellQuote quotes a word for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// prefixWriter copies a background process's output to GinkgoWriter line by
// line, each line prefixed with the pod it comes from.
type prefixWriter struct {
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		fmt.Fprintf(GinkgoWriter, "%s%s\n", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}
