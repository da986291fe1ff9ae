package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

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
