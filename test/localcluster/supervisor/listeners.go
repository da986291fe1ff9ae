package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Listeners returns the TCP addresses (v4 and v6) that the processes of
// process group pgid listen on, read from /proc: their socket inodes,
// matched against the kernel's tables of listening sockets. A group, not a
// PID, because some components run under a wrapper (unshare, sh).
func Listeners(pgid int) ([]string, error) {
	inodes := map[string]bool{}
	seen := map[string]bool{}
	var netnsPIDs []int
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		// Fields after the name: state, ppid, pgrp.
		if err != nil || len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && !seen[ns] {
			seen[ns] = true
			netnsPIDs = append(netnsPIDs, pid)
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue // exited meanwhile
		}
		for _, fd := range fds {
			target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(target, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
			}
		}
	}
	// Each network namespace of the group's processes has its own tables
	// (a component entered into another's, such as a real node's kubelet,
	// listens in that one).
	var out []string
	for _, pid := range netnsPIDs {
		for _, table := range []string{"tcp", "tcp6"} {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
			if errors.Is(err, os.ErrNotExist) {
				continue // IPv6 disabled, or the process exited meanwhile
			}
			if err != nil {
				return nil, err
			}
			for _, line := range strings.Split(string(data), "\n")[1:] {
				f := strings.Fields(line)
				// local_address, st (0A is LISTEN), inode.
				if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
					continue
				}
				addr, err := procAddr(f[1])
				if err != nil {
					return nil, err
				}
				out = append(out, addr)
			}
		}
	}
	return out, nil
}

// procAddr decodes /proc/net/tcp's hex "address:port" (the address in the
// kernel's byte order, 32-bit words little-endian).
func procAddr(s string) (string, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok || len(host)%8 != 0 {
		return "", errors.New("bad /proc/net/tcp address " + s)
	}
	ip := make(net.IP, 0, len(host)/2)
	for w := 0; w < len(host); w += 8 {
		word, err := strconv.ParseUint(host[w:w+8], 16, 32)
		if err != nil {
			return "", err
		}
		ip = append(ip, byte(word), byte(word>>8), byte(word>>16), byte(word>>24))
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(p, 10)), nil
}

// missingPorts returns the ports of want that no address of addrs uses.
func missingPorts(addrs []string, want []int) []int {
	listening := map[int]bool{}
	for _, a := range addrs {
		if _, p, err := net.SplitHostPort(a); err == nil {
			n, _ := strconv.Atoi(p)
			listening[n] = true
		}
	}
	var out []int
	for _, p := range want {
		if !listening[p] {
			out = append(out, p)
		}
	}
	return out
}
