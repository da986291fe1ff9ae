package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one component of the local cluster, run in the background
// with its output in logs/<name>.log and its PID in pids/<name>.pid.
type process struct {
	name string
	argv []string
	env  []string
}

func (c *cluster) start(p process) error {
	logFile, err := os.OpenFile(filepath.Join(c.dir, "logs", p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), p.env...)
	// Its own session: the component outlives `cluster up` and a terminal's
	// signals, and is stopped by PID.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	c.logf("started %-24s pid %d", p.name, pid)
	return os.WriteFile(filepath.Join(c.dir, "pids", p.name+".pid"), []byte(strconv.Itoa(pid)), 0o644)
}

// running lists the components whose PID file names a live process.
func (c *cluster) running() map[string]int {
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(c.dir, "pids", "*.pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err == nil && alive(pid) {
			out[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	return out
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie left by a dead parent counts as gone.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// stopAll stops components in the reverse of startOrder: SIGTERM to the
// process group, then SIGKILL after a grace period.
func (c *cluster) stopAll() {
	running := c.running()
	for i := len(startOrder) - 1; i >= 0; i-- {
		name := startOrder[i]
		pid, ok := running[name]
		if !ok {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = os.Remove(filepath.Join(c.dir, "pids", name+".pid"))
		c.logf("stopped %-24s pid %d", name, pid)
	}
}

// waitFor polls check until it succeeds or the timeout passes; the error
// names the component and points at its log.
func (c *cluster) waitFor(ctx context.Context, name string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if _, ok := c.running()[name]; !ok && name != "" {
			return fmt.Errorf("%s exited; see %s", name, filepath.Join(c.dir, "logs", name+".log"))
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s not ready after %s; see %s", name, timeout, filepath.Join(c.dir, "logs", name+".log")), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
