package supervisor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StopGrace is how long a process has between SIGTERM and SIGKILL.
const StopGrace = 10 * time.Second

// KillGrace is how long StopPID waits for a killed group to be gone.
const KillGrace = 30 * time.Second

// Spec is a process to start.
type Spec struct {
	Name string
	Argv []string
	// Env is added to this process's environment.
	Env []string
	// Log receives the process's standard output and error; it is
	// truncated first.
	Log string
	// Detach lets the process outlive its starter (test/localcluster up): a
	// session of its own, out of reach of a terminal's signals. Without it
	// the process is killed when its starter dies (benchmarks, tests), so a
	// crashed run leaves nothing behind.
	Detach bool
}

// Process is a started process. It is stopped by its PID, never by name.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how it exited, once done is closed
}

// Start starts spec's process in a process group of its own.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("starting %s: no command", spec.Name)
	}
	f, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), spec.Env...)
	if spec.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", spec.Name, err)
	}
	p := &Process{Name: spec.Name, Log: spec.Log, cmd: cmd, done: make(chan struct{})}
	// Reaped while the starter runs; a detached process left running when
	// the starter exits is adopted by init.
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process's ID, also its process group's.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitError is how the process ended, once Exited.
func (p *Process) ExitError() error {
	if !p.Exited() {
		return nil
	}
	if p.err == nil {
		return errors.New("exit status 0")
	}
	return p.err
}

// Stop stops the process group (see StopPID) and returns once the
// process has exited.
func (p *Process) Stop() {
	StopPID(p.PID())
	<-p.done
}

// StopPID stops a process group by its leader's PID: SIGTERM, then
// SIGKILL after StopGrace. It returns once no process of the group is
// left: a wrapper (nsenter, unshare) may exit before what it runs.
func StopPID(pgid int) {
	if !groupAlive(pgid) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(StopGrace)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if groupAlive(pgid) {
		// A killed process ends only once its current system call returns:
		// on a busy disk, an fsync may hold it for seconds.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		deadline = time.Now().Add(KillGrace)
		for groupAlive(pgid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// groupAlive reports whether any process of the group is left that is
// not a zombie.
func groupAlive(pgid int) bool {
	if pgid <= 0 || syscall.Kill(-pgid, 0) != nil {
		return false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Fields after the name: state, ppid, pgrp.
		if f, err := procStat(pid); err == nil && len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// Alive reports whether pid runs; a zombie counts as gone.
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	state, err := procState(pid)
	return err == nil && state != "Z" && state != "X"
}

// procStat returns the fields of /proc/<pid>/stat after the command name
// (which may hold spaces): state first, then ppid, pgrp, session, ...
func procStat(pid int) ([]string, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strings.Fields(string(stat[i+1:])), nil
}

func procState(pid int) (string, error) {
	f, err := procStat(pid)
	if err != nil || len(f) == 0 {
		return "", errors.Join(err, fmt.Errorf("short /proc/%d/stat", pid))
	}
	return f[0], nil
}

// Tail returns the last n lines of a log file, each indented, for error
// messages; a missing file says so.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "  (the log is empty)"
	}
	const maxLine = 400
	for i, l := range lines {
		if len(l) > maxLine {
			l = l[:maxLine] + " …"
		}
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// logContains reports whether the log file holds s, case-insensitively.
func logContains(path, s string) bool {
	data, err := os.ReadFile(path)
	return err == nil && bytes.Contains(bytes.ToLower(data), []byte(strings.ToLower(s)))
}
