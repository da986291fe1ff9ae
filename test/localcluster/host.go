package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// What the real nodes leave on the host, and how it is undone. Each node
// lives in namespaces of its own (mount, PID, network), which end with its
// processes and take its containers, veth, routes, iptables rules and
// ipsets with them; the host keeps the bridge, its routes to the nodes'
// pods, the nodes' cgroups, the sysctls the kubelets set and the
// directories made for their mounts.

// hostClaim names the cluster directory whose real nodes own what the
// machine has one of (the bridge, the addresses on it, the cgroups, the
// kubelets' sysctls): two clusters' nodes at once would share and then
// delete them under each other. Under /run, so a reboot, which ends both
// the nodes and their bridge, ends the claim too.
const hostClaim = "/run/torus-real-node"

// nodeExitGrace is how long the nodes' processes have to exit once their
// PID namespace has ended.
const nodeExitGrace = 30 * time.Second

// nodeTraces is what the nodes leave on the host, kept in node.json for
// down.
type nodeTraces struct {
	// Nodes is how many real nodes the cluster runs.
	Nodes       int               `json:"nodes"`
	CreatedDirs []string          `json:"createdDirs"`
	Sysctls     map[string]string `json:"sysctls"`
}

func (c *cluster) readTraces() (*nodeTraces, error) {
	data, err := os.ReadFile(filepath.Join(c.dir, "node.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t := &nodeTraces{}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("reading node.json: %w", err)
	}
	return t, nil
}

// claimHost makes this cluster the one with real nodes on the host. A claim held
// by a cluster that still runs is refused, with how to stop it; one whose
// processes are all gone is cleaned up first (reclaimHost).
func (c *cluster) claimHost() error {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(hostClaim, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, err = f.WriteString(c.dir + "\n")
			return errors.Join(err, f.Close())
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("claiming the machine for the real nodes: %w", err)
		}
		if attempt > 1 {
			owner, _ := claimOwner()
			return fmt.Errorf("%s holds %q: remove it once no real node runs on the host", hostClaim, owner)
		}
		if err := c.reclaimHost(); err != nil {
			return err
		}
	}
}

// reclaimHost cleans up after the real nodes of the cluster holding the
// machine's claim when that cluster's processes are all gone (killed with
// the session that started them, so down never ran), from that cluster's
// own record of the machine's state before it. No claim: nothing to do. A
// claim held by a cluster that still runs is refused, with how to stop it.
func (c *cluster) reclaimHost() error {
	owner, err := claimOwner()
	if err != nil || owner == "" {
		return err
	}
	prev := &cluster{dir: owner}
	// Its recorded PIDs are dead; the node's namespace dies with them
	// (unshare --kill-child). Command lines naming its directory are
	// looked for too, for a node whose processes outlived them (one
	// started before --kill-child was used).
	if running := prev.running(); len(running) > 0 || nodeProcessRuns(prev.dir) {
		return fmt.Errorf("the real nodes of the cluster in %s run on the host, and one cluster at a time can have them (its bridge %s, addresses and cgroups are the host's); stop it first: go run ./test/localcluster down -dir %s", owner, bridgeName, owner)
	}
	// The nodes its record names, read before cleaning up ends it.
	nodes := prev.realNodeList()
	if err := prev.cleanRealNode(); err != nil {
		return fmt.Errorf("cleaning up the real node that the cluster in %s left when its processes were killed: %w", owner, err)
	}
	// Their disks go too, as down would have removed them: each holds
	// a containerd image store of gigabytes. The logs stay.
	for _, n := range nodes {
		if err := os.RemoveAll(prev.nodeDir(n)); err != nil {
			return fmt.Errorf("removing the files of %s, left by the cluster in %s: %w", n.name(), owner, err)
		}
	}
	c.logf("cleaned up the real node left by %s, whose processes had been killed", owner)
	return nil
}

// nodeProcessRuns reports whether a process's command line names a real
// node's directory under dir, where its kubelet and containerd keep their
// configuration.
func nodeProcessRuns(dir string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), dir+"/node-") {
			return true
		}
	}
	return false
}

// claimOwner is the directory of the cluster holding hostClaim, or "".
func claimOwner() (string, error) {
	data, err := os.ReadFile(hostClaim)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", hostClaim, err)
	}
	return strings.TrimSpace(string(data)), nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// releaseHost deletes the bridge (and with it the routes through it), the
// host ends of the nodes' veths should their namespaces outlive them, and
// the nodes' cgroups, then the claim.
func releaseHost() error {
	var errs []error
	veths, _ := filepath.Glob(filepath.Join("/sys/class/net", vethPrefix+"*"))
	for _, v := range veths {
		// The kernel removes a veth whose peer's namespace goes, which may
		// happen between the listing and the delete: gone is deleted.
		if out, err := exec.Command("ip", "link", "delete", filepath.Base(v)).CombinedOutput(); err != nil && linkExists(filepath.Base(v)) {
			errs = append(errs, fmt.Errorf("deleting %s: %w: %s", filepath.Base(v), err, out))
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridgeName)); err == nil {
		if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting bridge %s: %w: %s", bridgeName, err, out))
		}
	}
	for _, r := range nodeCgroups() {
		if err := removeCgroup(r); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.Remove(hostClaim); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("releasing the machine's real node: %w", err)
	}
	return nil
}

// cleanRealNode undoes what the node left on the host once its processes
// are gone: the sysctls the kubelet changed and the directories made for
// its mounts (from node.json), then, while this cluster holds the
// machine's claim, the bridge and the nodes' cgroups. Without the claim
// those are another cluster's, and the record is stale: another start
// already cleaned up after this one.
func (c *cluster) cleanRealNode() error {
	record := filepath.Join(c.dir, "node.json")
	t, err := c.readTraces()
	if err != nil {
		return err
	}
	owner, err := claimOwner()
	if err != nil {
		return err
	}
	if owner != c.dir {
		if t == nil {
			return nil // no real node ran
		}
		return os.Remove(record)
	}
	if err := awaitNodeProcessesGone(); err != nil {
		return err
	}
	if t != nil {
		var errs []error
		for s, v := range t.Sysctls {
			if err := os.WriteFile(filepath.Join("/proc/sys", s), []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring sysctl %s: %w", s, err))
			}
		}
		// Only if still empty: another program may have put something there
		// since (ip netns add, for one).
		for _, d := range t.CreatedDirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s, made for the node's mounts: %w", d, err))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	if err := releaseHost(); err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	return os.Remove(record)
}

// nodeCgroups are the nodes' cgroup roots in every hierarchy.
func nodeCgroups() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupPrefix + "*")
	more, _ := filepath.Glob("/sys/fs/cgroup/" + cgroupPrefix + "*")
	return append(roots, more...)
}

// nodeProcesses are the PIDs in the nodes' cgroups, with their command
// lines.
func nodeProcesses() map[int]string {
	procs := map[int]string{}
	for _, root := range nodeCgroups() {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
					procs[pid] = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
				}
			}
			return nil
		})
	}
	return procs
}

// awaitNodeProcessesGone waits until the nodes' cgroups hold no process.
// The end of a node's first process kills the rest of its PID namespace,
// but they exit on their own time (a container freeing gigabytes takes a
// while on a loaded machine), and a cgroup cannot be removed before they
// have. Those still there after the grace are the node's own, by their
// cgroup: they are killed by PID.
func awaitNodeProcessesGone() error {
	empty := func(context.Context) error {
		if left := nodeProcesses(); len(left) > 0 {
			return fmt.Errorf("processes left in the nodes' cgroups: %v", left)
		}
		return nil
	}
	if supervisor.Poll(context.Background(), nodeExitGrace, empty) == nil {
		return nil
	}
	for pid := range nodeProcesses() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := supervisor.Poll(context.Background(), 10*time.Second, empty); err != nil {
		return fmt.Errorf("the real nodes' processes outlived them and SIGKILL: %w", err)
	}
	return nil
}

// removeCgroup removes a cgroup directory tree, children first (cgroup
// directories are removed with rmdir, never by deleting their files).
func removeCgroup(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroup(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing cgroup %s: %w", dir, err)
	}
	return nil
}

// recordTraces notes which of hostPaths exist and the kernel tunables'
// values before the node starts.
func (c *cluster) recordTraces() error {
	t := nodeTraces{Nodes: c.realNodes, Sysctls: map[string]string{}}
	for _, p := range hostPaths {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			// Record the topmost directory the node will create.
			top := p
			for parent := filepath.Dir(top); parent != "/"; parent = filepath.Dir(parent) {
				if _, err := os.Stat(parent); err == nil {
					break
				}
				top = parent
			}
			t.CreatedDirs = append(t.CreatedDirs, top)
		}
	}
	for _, s := range kernelTunables {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return fmt.Errorf("reading sysctl %s: %w", s, err)
		}
		t.Sysctls[s] = strings.TrimSpace(string(v))
	}
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, "node.json"), data, 0o644)
}
