package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PIDRecord is a process as a PID file records it: its PID and its start
// time (clock ticks since boot, /proc/<pid>/stat's 22nd field). PIDs wrap
// at /proc/sys/kernel/pid_max (32768 by default), and a busy machine
// reuses them within minutes: a process with the PID but another start
// time is not the one recorded, and stopping it by that PID would stop a
// stranger.
type PIDRecord struct {
	PID int
	// Start is zero in a file that records a PID alone.
	Start uint64
}

// Alive reports whether the recorded process still runs: its PID runs, is
// no zombie, and started when recorded.
func (r PIDRecord) Alive() bool {
	if !Alive(r.PID) {
		return false
	}
	if r.Start == 0 {
		return true
	}
	start, err := StartTime(r.PID)
	return err == nil && start == r.Start
}

// StartTime is when pid started, in clock ticks since boot.
func StartTime(pid int) (uint64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	// Fields after the name start at the third (state): the 22nd is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// WritePIDFile records the process pid at path, as "PID START"; one
// already gone and reaped, whose start cannot be read, by its PID alone,
// for whoever reads the file to find it dead.
func WritePIDFile(path string, pid int) error {
	if start, err := StartTime(pid); err == nil {
		return os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", pid, start), 0o644)
	}
	return os.WriteFile(path, fmt.Appendf(nil, "%d\n", pid), 0o644)
}

// ReadPIDFile reads a record WritePIDFile wrote, or a PID alone.
func ReadPIDFile(path string) (PIDRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return PIDRecord{}, err
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 || len(fields) > 2 {
		return PIDRecord{}, fmt.Errorf("%s: want \"PID START\", got %q", path, data)
	}
	var r PIDRecord
	if r.PID, err = strconv.Atoi(fields[0]); err != nil {
		return PIDRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(fields) == 2 {
		if r.Start, err = strconv.ParseUint(fields[1], 10, 64); err != nil {
			return PIDRecord{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return r, nil
}
