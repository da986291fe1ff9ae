package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a process the benchmark started: it is stopped by its own PID
// (and process group), never by name.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(logPath string, env []string, argv ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// A group of its own, so that stopping it reaches nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after 10 seconds.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}

// usage is what /proc says about a process: CPU seconds (user+system) and
// peak resident memory (VmHWM).
type usage struct {
	CPU     float64 // seconds
	PeakRSS int64   // bytes
	// RSSAnon and RSSFile split the current RSS into the heap and stacks,
	// and the binary's pages: a larger binary costs resident memory too.
	RSSAnon, RSSFile int64
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func readUsage(pid int) (usage, error) {
	var u usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which may hold spaces: utime and
	// stime are fields 14 and 15 of the whole line.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(rest) < 13 {
		return u, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(rest[11], 10, 64)
	stime, err2 := strconv.ParseInt(rest[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	u.CPU = float64(utime+stime) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var field *int64
		switch name {
		case "VmHWM":
			field = &u.PeakRSS
		case "RssAnon":
			field = &u.RSSAnon
		case "RssFile":
			field = &u.RSSFile
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return u, fmt.Errorf("parsing %s in /proc/%d/status: %w", name, pid, err)
		}
		*field = kb * 1024
	}
	return u, nil
}
