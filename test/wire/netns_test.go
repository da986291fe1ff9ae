package wire_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// nsPrefix starts the name of every network namespace the wire test
	// makes, followed by the test's process id, so that a later run can
	// tell its own leftovers from a concurrent run's.
	nsPrefix = "torus-wire-"
	// subnet holds the pods' addresses. It exists only on the job's own
	// bridge, which lives in a namespace of its own: nothing is added to
	// the machine's network namespace, and no traffic leaves the sandbox.
	subnet    = "10.233.0."
	prefixLen = "/24"
	// firstHost is the last byte of the first pod's address.
	firstHost = 10
	ipTimeout = 10 * time.Second
)

// network is one job's private network: a bridge in a "switch" namespace and
// one namespace per pod, wired to it by a veth pair.
type network struct {
	prefix   string
	switchNS string
	pods     []string
}

func ip(ctx context.Context, args ...string) error {
	_, err := runFor(ctx, ipTimeout, nil, append([]string{"ip"}, args...)...)
	return err
}

// newNetwork creates the switch namespace and its bridge. name tells jobs
// apart.
func newNetwork(ctx context.Context, name string) (*network, error) {
	n := &network{prefix: fmt.Sprintf("%s%d-%s-", nsPrefix, os.Getpid(), name)}
	n.switchNS = n.prefix + "switch"
	if err := ip(ctx, "netns", "add", n.switchNS); err != nil {
		return nil, fmt.Errorf("creating the switch namespace: %w", err)
	}
	for _, args := range [][]string{
		{"-n", n.switchNS, "link", "add", "br0", "type", "bridge"},
		{"-n", n.switchNS, "link", "set", "br0", "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			return n, fmt.Errorf("creating the bridge: %w", err)
		}
	}
	return n, nil
}

// addPod creates the namespace of the index-th pod and plugs it into the
// bridge. It returns the namespace's name and the pod's address.
func (n *network) addPod(ctx context.Context, hostname string, index int) (ns, addr string, err error) {
	ns = n.prefix + hostname
	addr = subnet + strconv.Itoa(firstHost+index)
	if err := ip(ctx, "netns", "add", ns); err != nil {
		return "", "", fmt.Errorf("creating the namespace of %s: %w", hostname, err)
	}
	n.pods = append(n.pods, ns)
	port := "p" + strconv.Itoa(index)
	for _, args := range [][]string{
		{"-n", n.switchNS, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", n.switchNS, "link", "set", port, "master", "br0", "up"},
		{"-n", ns, "addr", "add", addr + prefixLen, "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			return "", "", fmt.Errorf("wiring %s to the bridge: %w", hostname, err)
		}
	}
	return ns, addr, nil
}

// remove kills every process left in the job's namespaces (an sshd's
// sessions, orted, ranks) and deletes the namespaces and their /etc/netns
// files. It goes on after errors and returns them all.
func (n *network) remove(ctx context.Context) error {
	var errs []error
	for _, ns := range append(append([]string(nil), n.pods...), n.switchNS) {
		errs = append(errs, deleteNamespace(ctx, ns))
	}
	return errors.Join(errs...)
}

// deleteNamespace empties and deletes one network namespace.
func deleteNamespace(ctx context.Context, ns string) error {
	if err := killNamespace(ctx, ns); err != nil {
		return err
	}
	var errs []error
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
		errs = append(errs, ip(ctx, "netns", "delete", ns))
	}
	errs = append(errs, os.RemoveAll(filepath.Join("/etc/netns", ns)))
	return errors.Join(errs...)
}

// killNamespace kills the processes in a namespace and waits until they are
// gone, so the namespace really disappears when deleted.
func killNamespace(ctx context.Context, ns string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := runFor(ctx, ipTimeout, nil, "ip", "netns", "pids", ns)
		if err != nil {
			return fmt.Errorf("listing processes in %s: %w", ns, err)
		}
		pids := strings.Fields(out)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in %s survive SIGKILL", pids, ns)
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeStaleNamespaces deletes what earlier wire test runs, killed before
// they could clean up, left behind, and nothing of a run still alive. It
// runs before this run makes any namespace: one named with this process's
// own PID is a killed run's whose PID the machine has handed out again (a
// busy machine reuses PIDs within minutes), and would collide with the
// names this run gives its own.
func removeStaleNamespaces(ctx context.Context) error {
	self := strconv.Itoa(os.Getpid())
	return removeNamespacesWhere(ctx, func(rest string) bool {
		pid, _, _ := strings.Cut(rest, "-")
		if pid == self {
			return true
		}
		_, err := os.Stat(filepath.Join("/proc", pid))
		return err != nil
	})
}

// removeOwnNamespaces deletes whatever this run's specs could not.
func removeOwnNamespaces(ctx context.Context) error {
	own := strconv.Itoa(os.Getpid()) + "-"
	return removeNamespacesWhere(ctx, func(rest string) bool { return strings.HasPrefix(rest, own) })
}

// removeNamespacesWhere deletes the wire test's namespaces, and their
// /etc/netns files, whose name after nsPrefix matches.
func removeNamespacesWhere(ctx context.Context, match func(rest string) bool) error {
	names := map[string]bool{}
	for _, dir := range []string{"/run/netns", "/etc/netns"} {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("listing network namespaces: %w", err)
		}
		for _, e := range entries {
			if rest, ok := strings.CutPrefix(e.Name(), nsPrefix); ok && match(rest) {
				names[e.Name()] = true
			}
		}
	}
	var errs []error
	for name := range names {
		errs = append(errs, deleteNamespace(ctx, name))
	}
	return errors.Join(errs...)
}

// dialIn connects to host:port from inside a network namespace, as a TCP
// readiness probe does, with bash's /dev/tcp: it only opens a connection.
func dialIn(ctx context.Context, ns, host string, port int) error {
	_, err := runFor(ctx, 2*time.Second, nil, "ip", "netns", "exec", ns,
		"bash", "-c", fmt.Sprintf(": </dev/tcp/%s/%d", host, port))
	return err
}
