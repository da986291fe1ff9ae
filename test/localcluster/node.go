package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// The real nodes: kubelets and containerd (runc, the CNI bridge plugin)
// beside the kwok nodes, so that pods really run. Each node has a mount,
// PID and network namespace of its own: every path the kubelet or
// containerd hard-codes (/run/containerd, /run/netns, /var/lib/cni,
// /var/log/containers, /var/lib/kubelet) is a tmpfs there; its network is
// one veth on the cluster's bridge, with its pods behind it; and stopping
// its containerd (the namespace's first process) ends every shim and
// container with it. What the host still sees — the bridge and its routes,
// cgroups, sysctls the kubelets set, directories made for those mounts —
// is recorded and undone by down (host.go).
const (
	// bridgeName: the nodes talk to each other and to the control plane
	// on a bridge the cluster creates, with no route off it: the host's
	// ip_forward stays as it is (forwarding happens inside each node's
	// own network namespace, between its veth and its pods).
	bridgeName = "torus0"
	// hostIP is the host's address on the bridge, where the API server
	// and CoreDNS listen for the nodes and their pods (there is no
	// kube-proxy to take pods from a Service address to 127.0.0.1).
	hostIP = "10.234.0.1"
	// bridgeMAC is set, not left to the kernel: a bridge without one takes
	// the lowest MAC of its ports, so a node's veth going would change the
	// host's MAC under every other node. Locally administered: "torus" in
	// ASCII.
	bridgeMAC = "02:74:6f:72:75:73"
	// vethPrefix names the host ends of the nodes' veths; cgroupPrefix the
	// nodes' cgroup roots: each kubelet keeps to its own, or it would take
	// the other's pods for orphans and remove their cgroups.
	vethPrefix   = "torus0n"
	cgroupPrefix = "torus-real-node-"
	// noPull is where the nodes' containerd sends every pull: a loopback
	// port of the node's own network namespace, where nothing listens. A
	// pod naming an image the node does not have fails at once, with no
	// lookup of a registry's name and nothing sent off the machine.
	noPull = "http://127.0.0.1:9"
	// Images of the nodes' stores, imported from archives built here.
	pauseImage = "registry.torus.local/pause:1"
	tinyImage  = "registry.torus.local/tiny:1"
	// mpiImage: Debian bookworm with Open MPI 4, OpenSSH, mpi4py and
	// /opt/torus/pi.py; mpiTrixieImage: Debian trixie with MPICH 4.2,
	// Open MPI 5 and /opt/torus/pi-mpich, pi-openmpi5. Both run as
	// mpiuser (1000). See test/localcluster/images/mpi/build.sh.
	mpiImage       = "registry.torus.local/mpi:1"
	mpiTrixieImage = "registry.torus.local/mpi-trixie:1"
	// The same images with every OpenSSH package purged (SUITE-nossh), for
	// jobs using Torus's launch agent.
	mpiImageNoSSH       = "registry.torus.local/mpi-nossh:1"
	mpiTrixieImageNoSSH = "registry.torus.local/mpi-trixie-nossh:1"
	// mpiImageAgentPath is where mpiImageNoSSH also holds torus-launch,
	// built from this tree: a job annotated with it
	// (api.AnnotationLaunchAgentPath) runs the agent from there.
	mpiImageAgentPath = "/usr/local/bin/torus-launch"
	// realNodeLabel marks the real nodes, for pods that must run there
	// (images only their stores have).
	realNodeLabel = "torus-mpi.io/real-node"
	// defaultRealNodes: two, so that an MPI job's ranks cross a node
	// boundary as on the users' clusters.
	defaultRealNodes = 2
	// maxRealNodes: each node's pods are a /24 of 10.234.0.0/16.
	maxRealNodes = 16
)

// realNode is one of the cluster's real nodes, by index: its name,
// addresses and paths follow from it.
type realNode struct{ i int }

func (n realNode) name() string { return fmt.Sprintf("real-node-%d", n.i) }

// ip is the node's address on the bridge: the kubelet's node IP.
func (n realNode) ip() string { return fmt.Sprintf("10.234.0.%d", 10+n.i) }

// podSubnet holds the node's pods, routed through the node's address.
func (n realNode) podSubnet() string { return fmt.Sprintf("10.234.%d.0/24", 10+n.i) }

// gateway is the node's address on its pods' bridge.
func (n realNode) gateway() string { return fmt.Sprintf("10.234.%d.1", 10+n.i) }

func (n realNode) veth() string       { return vethPrefix + strconv.Itoa(n.i) }
func (n realNode) cgroupRoot() string { return "/" + cgroupPrefix + strconv.Itoa(n.i) }

// component names one of the node's processes for the supervisor.
func (n realNode) component(name string) string { return fmt.Sprintf("%s-%d", name, n.i) }

// hostPaths are mounted over in each node's mount namespace: with tmpfs,
// and kubeletRoot with the node's own directory.
var hostPaths = []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/log/containers", kubeletRoot}

// kubeletRoot is the kubelet's directory in its node's mount namespace.
const kubeletRoot = "/var/lib/kubelet"

// kernelTunables are the sysctls the kubelet sets at start
// (protectKernelDefaults false); down puts back what they were.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// realNodeList lists the real nodes this cluster runs: as asked at up, or as
// node.json recorded since (status, down).
func (c *cluster) realNodeList() []realNode {
	count := 0
	switch {
	case c.realNode:
		count = c.realNodes
	default:
		if t, err := c.readTraces(); err == nil && t != nil {
			count = max(t.Nodes, 1)
		}
	}
	out := make([]realNode, count)
	for i := range out {
		out[i] = realNode{i}
	}
	return out
}

func (c *cluster) nodeDir(n realNode, parts ...string) string {
	return filepath.Join(append([]string{c.dir, "node-" + strconv.Itoa(n.i)}, parts...)...)
}

// nodeCheck says why real nodes cannot run on the host, if they
// cannot: what they need that is missing, or a host that would drop their
// traffic.
func (c *cluster) nodeCheck(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the real nodes need root (containerd, runc, namespaces, mounts, cgroups)")
	}
	for _, b := range []string{"runc", "unshare", "nsenter", "ip", "iptables", "ipset"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s is missing: run make node-deps (Debian's runc, containernetworking-plugins, iptables, ipset)", b)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return errors.New("/usr/lib/cni/bridge is missing: run make node-deps")
	}
	for _, b := range []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "kube-router", "multus", "whereabouts"} {
		if _, err := os.Stat(c.bin(b)); err != nil {
			return fmt.Errorf("%s is missing: run make node-deps", c.bin(b))
		}
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		return errors.New("the kernel module br_netfilter is not loaded (modprobe br_netfilter): without it NetworkPolicies could not be enforced between pods of one node")
	}
	return bridgeFiltered(ctx)
}

// prepareRealNodes makes the nodes' bridge before the control plane
// starts: the API server listens on the host's address there.
func (c *cluster) prepareRealNodes(ctx context.Context) error {
	if err := c.nodeCheck(ctx); err != nil {
		return err
	}
	if err := c.claimHost(); err != nil {
		return err
	}
	if err := c.recordTraces(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridgeName)); err == nil {
		// No cluster claims it (one that did was cleaned up above): left
		// by real nodes from before the claim.
		if out, err := exec.CommandContext(ctx, "ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			return fmt.Errorf("deleting bridge %s, which no cluster claims: %w: %s", bridgeName, err, out)
		}
		c.logf("deleted bridge %s, which no cluster claimed", bridgeName)
	}
	cmds := [][]string{
		{"link", "add", bridgeName, "address", bridgeMAC, "type", "bridge"},
		{"addr", "add", hostIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	}
	// The host reaches each node's pods (their replies from the API server
	// and CoreDNS) through that node's address: routes on the cluster's
	// bridge, gone with it.
	for _, n := range c.realNodeList() {
		cmds = append(cmds, []string{"route", "add", n.podSubnet(), "via", n.ip(), "dev", bridgeName})
	}
	for _, args := range cmds {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// startRealNodes starts each node's containerd, imports the images into
// them side by side, joins each to the bridge, then starts CoreDNS and
// the kubelets.
func (c *cluster) startRealNodes(ctx context.Context) error {
	archives, err := c.nodeArchives(ctx)
	if err != nil {
		return err
	}
	inits := make([]int, len(c.realNodeList()))
	for _, n := range c.realNodeList() {
		for _, d := range []string{"containerd/root", "containerd/state", "cni/net.d", "cni/cluster", "cni/bin", "cni/ipam", "kubelet", "pod-logs", "certs.d/_default"} {
			if err := os.MkdirAll(c.nodeDir(n, d), 0o755); err != nil {
				return err
			}
		}
		if err := makeCgroupRoot(n.cgroupRoot()); err != nil {
			return err
		}
		containerd, err := c.startContainerd(ctx, n)
		if err != nil {
			return err
		}
		if inits[n.i], err = nsInit(containerd.PID()); err != nil {
			return fmt.Errorf("finding %s's namespaces: %w", n.name(), err)
		}
		if err := c.joinBridge(ctx, n, inits[n.i]); err != nil {
			return fmt.Errorf("%s's network: %w", n.name(), err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range c.realNodeList() {
		g.Go(func() error {
			for _, a := range archives {
				start := time.Now()
				if out, err := exec.CommandContext(gctx, c.bin("ctr"), "--address", c.nodeDir(n, "containerd.sock"), "-n", "k8s.io",
					"images", "import", a).CombinedOutput(); err != nil {
					return fmt.Errorf("importing %s into %s: %w: %s", a, n.name(), err, out)
				}
				c.logf("imported %s into %s in %.1fs", filepath.Base(a), n.name(), time.Since(start).Seconds())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := c.startCoreDNS(ctx); err != nil {
		return err
	}
	for _, n := range c.realNodeList() {
		if err := c.startKubelet(ctx, n, inits[n.i]); err != nil {
			return err
		}
	}
	for _, n := range c.realNodeList() {
		if err := c.startPolicyAgent(ctx, n, inits[n.i]); err != nil {
			return err
		}
	}
	return nil
}

// startPolicyAgent enforces NetworkPolicies on a node: kube-router's
// network policy controller alone (no routing, no service proxy, no CNI
// of its own), in the node's network namespace, where it writes iptables
// rules and ipsets that go with the namespace.
func (c *cluster) startPolicyAgent(ctx context.Context, n realNode, target int) error {
	// kube-router tells the node's own pods by its pod CIDR, which the
	// node IPAM controller (not run here) would set.
	patch := []byte(fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, n.podSubnet(), n.podSubnet()))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name()}}
	if err := c.client.Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("setting %s's pod CIDR: %w", n.name(), err)
	}
	// The RDMA device resource the secondary network's definition names,
	// advertised as a device plugin would: simulated, as on the kwok nodes
	// (this kernel has no RDMA device).
	devices := []byte(fmt.Sprintf(`{"status":{"capacity":{%q:"100"}}}`, simulatedRDMA))
	if err := c.client.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, devices)); err != nil {
		return fmt.Errorf("advertising %s on %s: %w", simulatedRDMA, n.name(), err)
	}
	_, _, err := c.run(ctx, supervisor.Component{
		Name: n.component("kube-router"), Ports: 1, Timeout: 60 * time.Second, // health
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			return supervisor.Spec{Argv: []string{
				"nsenter", "--target", strconv.Itoa(target), "--mount", "--pid", "--net", "--",
				c.bin("kube-router"), "--kubeconfig=" + c.kubeconfig(), "--hostname-override=" + n.name(),
				"--run-router=false", "--run-service-proxy=false", "--enable-cni=false", "--run-firewall=true",
				"--enable-pod-egress=false", "--health-port=" + strconv.Itoa(p[0]),
			}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			return c.httpGet(ctx, fmt.Sprintf("http://%s:%d/healthz", n.ip(), p[0]))
		},
	})
	return err
}

// makeCgroupRoot makes a node's cgroup root in every hierarchy (the
// kubelet refuses a root that does not exist), with the machine's CPUs
// and memory nodes in its cpuset (a new cpuset has none).
func makeCgroupRoot(root string) error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", root), 0o755) // cgroup v2
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if fi, err := os.Lstat(h); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct's other names are links to it
		}
		if err := os.MkdirAll(filepath.Join(h, root), 0o755); err != nil {
			return fmt.Errorf("making cgroup %s: %w", filepath.Join(h, root), err)
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
		if err != nil {
			continue // no cpuset hierarchy
		}
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", root, f), v, 0o644); err != nil {
			return fmt.Errorf("setting %s of cgroup %s: %w", f, root, err)
		}
	}
	return nil
}

// joinBridge gives a node's network namespace (that of process pid) its
// veth on the bridge, its address, and routes to the other nodes' pods;
// it forwards between them and its own pods.
func (c *cluster) joinBridge(ctx context.Context, n realNode, pid int) error {
	host := [][]string{
		{"link", "add", n.veth(), "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)},
		{"link", "set", n.veth(), "master", bridgeName, "up"},
	}
	for _, args := range host {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	inNode := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", n.ip() + "/24", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		// /proc/sys/net is the writer's network namespace's: this is the
		// node's forwarding, not the host's.
		{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"},
		// The policy agent's rules see traffic between pods of one node
		// (bridged, not routed) only so.
		{"sh", "-c", "echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables"},
	}
	for _, other := range c.realNodeList() {
		if other != n {
			inNode = append(inNode, []string{"ip", "route", "add", other.podSubnet(), "via", other.ip()})
		}
	}
	for _, args := range inNode {
		argv := append([]string{"--target", strconv.Itoa(pid), "--net", "--"}, args...)
		if out, err := exec.CommandContext(ctx, "nsenter", argv...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s in the node's network namespace: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// bridgeFiltered fails when the host would drop traffic between the nodes
// on the bridge: with br_netfilter on (Docker turns it on), bridged
// packets go through iptables' FORWARD chain, whose policy such hosts set
// to DROP.
func bridgeFiltered(ctx context.Context) error {
	v, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if err != nil || strings.TrimSpace(string(v)) != "1" {
		return nil // br_netfilter not loaded, or not filtering
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil // no rules can have been set with it
	}
	out, err := exec.CommandContext(ctx, "iptables", "-S", "FORWARD").Output()
	if err != nil {
		return fmt.Errorf("reading iptables' FORWARD policy: %w", err)
	}
	if strings.Contains(string(out), "-P FORWARD DROP") {
		return errors.New("the host drops forwarded packets (iptables -P FORWARD DROP) and filters bridged ones (net.bridge.bridge-nf-call-iptables=1): the real nodes could not reach each other; set net.bridge.bridge-nf-call-iptables=0, or run without -real-node")
	}
	return nil
}

// startCoreDNS serves the cluster's names to the real nodes' pods on the
// host's address: services, and pods by hostname and subdomain (the
// names of an MPI job's hostfile). Names beyond cluster.local get no
// answer: nothing is forwarded off the machine.
func (c *cluster) startCoreDNS(ctx context.Context) error {
	_, _, err := c.run(ctx, supervisor.Component{
		Name: "coredns", Ports: 1, // readiness
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			corefile := fmt.Sprintf(`cluster.local:53 {
    bind %[1]s
    errors
    ready 127.0.0.1:%[2]d
    kubernetes cluster.local {
        kubeconfig %[3]s torus-local
        pods insecure
    }
}
.:53 {
    bind %[1]s
    errors
}
`, hostIP, p[0], c.kubeconfig())
			path := filepath.Join(c.dir, "config", "Corefile")
			if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{Argv: []string{c.bin("coredns"), "-conf", path}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			return c.httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/ready", p[0]))
		},
	})
	return err
}

func (c *cluster) startContainerd(ctx context.Context, n realNode) (*supervisor.Process, error) {
	if err := c.writeCNI(n); err != nil {
		return nil, fmt.Errorf("%s's CNI configuration: %w", n.name(), err)
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", noPull, noPull)
	if err := os.WriteFile(c.nodeDir(n, "certs.d", "_default", "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[metrics]
  address = ""
# Its socket would be the host's /var/run/nri, shared by every node.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails
  # with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, c.nodeDir(n, "containerd", "root"), c.nodeDir(n, "containerd", "state"), c.nodeDir(n, "containerd.sock"),
		c.nodeDir(n, "containerd.sock.ttrpc"), pauseImage, c.nodeDir(n, "cni", "bin"), c.nodeDir(n, "cni", "net.d"), c.nodeDir(n, "certs.d"))
	cfgFile := c.nodeDir(n, "containerd.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	var mounts strings.Builder
	for _, p := range hostPaths {
		// One command a line: set -e does not stop at a failed left side of &&.
		if p == kubeletRoot {
			// The kubelet's own directory, at the path it and the plugins
			// that ask it for pods' devices (Multus) expect.
			fmt.Fprintf(&mounts, "mkdir -p %[1]s\nmount --bind %[2]s %[1]s\n", p, c.nodeDir(n, "kubelet"))
			continue
		}
		fmt.Fprintf(&mounts, "mkdir -p %[1]s\nmount -t tmpfs -o mode=0755 tmpfs %[1]s\n", p)
	}
	// sh is the namespace's first process: it reaps, and when containerd
	// ends it exits, which ends every process of the namespace (the
	// kubelet, entered into it, the shims and the containers), and with
	// them the network namespace and the node's veth. unshare's
	// --kill-child ties sh to the recorded PID: a SIGKILL of unshare (a
	// session killed before down runs) kills sh, and with it the whole
	// node, rather than leaving a kubelet behind that would remove the
	// next node's pod cgroups as orphans. SIGTERM still stops it gently:
	// unshare blocks it, and sh forwards it to containerd.
	// The pinned containerd finds its shim beside itself, ahead of any
	// the host has on its PATH.
	script := "set -e\n" + mounts.String() + fmt.Sprintf(`PATH=%s:$PATH %s --config %s &
pid=$!
trap 'kill -TERM $pid' TERM INT
wait $pid || true
wait $pid || true
`, c.testbin, c.bin("containerd"), cfgFile)
	p, _, err := c.run(ctx, supervisor.Component{
		Name: n.component("containerd"), Timeout: 60 * time.Second,
		Command: func(context.Context, []int) (supervisor.Spec, error) {
			return supervisor.Spec{Argv: []string{"unshare", "--mount", "--propagation", "private", "--pid", "--net", "--fork", "--mount-proc",
				"--kill-child", "/bin/sh", "-c", script}}, nil
		},
		Ready: func(ctx context.Context, _ []int) error {
			out, err := exec.CommandContext(ctx, c.bin("ctr"), "--address", c.nodeDir(n, "containerd.sock"), "version").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ctr version: %w: %s", err, out)
			}
			return nil
		},
	})
	return p, err
}

// writeCNI writes a node's CNI configuration: Multus's thin plugin, which
// gives each pod the cluster network (the bridge plugin, on the node's
// pod subnet) and the NetworkAttachmentDefinitions its annotation names,
// and writes what it attached into the pod's network-status. Its plugins
// are Debian's, Multus and Whereabouts (the secondary networks' IPAM,
// whose addresses are unique across the nodes).
func (c *cluster) writeCNI(n realNode) error {
	plugins, _ := filepath.Glob("/usr/lib/cni/*")
	plugins = append(plugins, c.bin("multus"), c.bin("whereabouts"))
	for _, p := range plugins {
		if err := os.Symlink(p, c.nodeDir(n, "cni", "bin", filepath.Base(p))); err != nil {
			return err
		}
	}
	// isDefaultGateway: the node's address on its pods' bridge is their
	// default route, and the plugin turns on forwarding in the node's
	// network namespace (only there). One configuration, not a list:
	// Multus keeps of a list only the fields it knows for the pod's
	// deletion, and host-local then cannot release the address.
	bridge := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "torus",
  "type": "bridge", "bridge": "pods", "isDefaultGateway": true, "ipMasq": false,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "dataDir": %q}
}
`, n.podSubnet(), n.gateway(), c.nodeDir(n, "cni", "ipam"))
	cluster := c.nodeDir(n, "cni", "cluster", "10-torus.conf")
	if err := os.WriteFile(cluster, []byte(bridge), 0o644); err != nil {
		return err
	}
	// containerd takes the first configuration of its directory: Multus's.
	multus, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0", "name": "multus", "type": "multus",
		"kubeconfig": c.kubeconfig(), "clusterNetwork": cluster,
		"binDir": c.nodeDir(n, "cni", "bin"), "cniDir": c.nodeDir(n, "cni", "multus"),
		"logFile": c.nodeDir(n, "multus.log"), "logLevel": "error",
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.nodeDir(n, "cni", "net.d", "00-multus.conf"), multus, 0o644)
}

// nsInit is the first process of the node's PID namespace: unshare's
// child.
func nsInit(unshare int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", unshare, unshare))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 1 {
		return 0, fmt.Errorf("unshare (pid %d) has children %q, want one", unshare, f)
	}
	return strconv.Atoi(f[0])
}

func (c *cluster) startKubelet(ctx context.Context, n realNode, target int) error {
	serving := filepath.Join(c.ca.Dir, n.component("kubelet"))
	if err := c.ca.ServingCertFor(serving, n.name(), []net.IP{net.ParseIP(n.ip())}, n.name()); err != nil {
		return err
	}
	resolv := c.nodeDir(n, "resolv.conf")
	// Pods get the cluster's DNS (clusterDNS), never the machine's.
	if err := os.WriteFile(resolv, []byte("options ndots:5\n"), 0o644); err != nil {
		return err
	}
	_, _, err := c.run(ctx, supervisor.Component{
		Name: n.component("kubelet"), Ports: 2, Timeout: 90 * time.Second, // server, healthz
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: %[1]s
healthzPort: %[3]d
tlsCertFile: %[4]s
tlsPrivateKeyFile: %[5]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[6]s}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupRoot: %[7]s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[8]s
podLogsDir: %[9]s
resolvConf: %[10]s
clusterDomain: cluster.local
clusterDNS: [%[11]s]
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, n.ip(), p[0], p[1], filepath.Join(serving, "tls.crt"), filepath.Join(serving, "tls.key"), c.ca.CAFile,
				n.cgroupRoot(), c.nodeDir(n, "containerd.sock"), c.nodeDir(n, "pod-logs"), resolv, hostIP)
			cfgFile := c.nodeDir(n, "kubelet.yaml")
			if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{Argv: []string{
				"nsenter", "--target", strconv.Itoa(target), "--mount", "--pid", "--net", "--",
				c.bin("kubelet"), "--config=" + cfgFile, "--kubeconfig=" + c.kubeconfig(),
				"--root-dir=" + kubeletRoot, "--hostname-override=" + n.name(),
				"--node-ip=" + n.ip(), "--node-labels=" + realNodeLabel + "=true",
			}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			if err := c.httpGet(ctx, fmt.Sprintf("http://%s:%d/healthz", n.ip(), p[1])); err != nil {
				return err
			}
			var node corev1.Node
			if err := c.client.Get(ctx, client.ObjectKey{Name: n.name()}, &node); err != nil {
				return err
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("node %s not Ready", n.name())
		},
	})
	return err
}

// localNetwork names the real nodes' secondary network, a macvlan
// NetworkAttachmentDefinition on each node's veth in namespace default,
// and the MPINetworkProfile that attaches it as net1 and pins Open MPI's
// traffic there. Its subnet is on the cluster's bridge, not routed
// anywhere. The device resource its definition names, simulatedRDMA, is
// advertised by the nodes but backed by no device: this kernel has no
// RDMA, so the interface is real and the RDMA device is not.
const (
	localNetwork       = "local-macvlan"
	localNetworkSubnet = "10.235.0.0/24"
	simulatedRDMA      = "rdma/hca_shared_devices_a"
)

// installLocalNetwork creates the secondary network and its profile.
func (c *cluster) installLocalNetwork(ctx context.Context) error {
	// Whereabouts reads where its IPPools are from a file of its own.
	whereabouts := filepath.Join(c.dir, "config", "whereabouts.conf")
	flat, err := json.Marshal(map[string]any{"datastore": "kubernetes", "kubernetes": map[string]any{"kubeconfig": c.kubeconfig()}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(whereabouts, flat, 0o644); err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": localNetwork, "type": "macvlan", "master": "eth0", "mode": "bridge",
		"ipam": map[string]any{"type": "whereabouts", "range": localNetworkSubnet, "configuration_path": whereabouts},
	})
	if err != nil {
		return err
	}
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": localNetwork, "namespace": "default",
			"annotations": map[string]any{"k8s.v1.cni.cncf.io/resourceName": simulatedRDMA}},
		"spec": map[string]any{"config": string(config)},
	}}
	if err := c.client.Create(ctx, nad); err != nil {
		return fmt.Errorf("creating NetworkAttachmentDefinition %s: %w", localNetwork, err)
	}
	profile := &torusv1alpha1.MPINetworkProfile{
		ObjectMeta: metav1.ObjectMeta{Name: localNetwork},
		Spec: torusv1alpha1.MPINetworkProfileSpec{
			Networks: []torusv1alpha1.NetworkAttachment{{Name: localNetwork, Namespace: "default", Interface: "net1"}},
			Env: []torusv1alpha1.ProfileEnv{
				{EnvVar: corev1.EnvVar{Name: "OMPI_MCA_btl_tcp_if_include", Value: "net1"}, Implementation: "OpenMPI"},
				{EnvVar: corev1.EnvVar{Name: "OMPI_MCA_btl_tcp_if_include", Value: "net1"}, Implementation: "OpenMPI5"},
				{EnvVar: corev1.EnvVar{Name: "FI_TCP_IFACE", Value: "net1"}, Implementation: "MPICH"},
			},
		},
	}
	if err := c.client.Create(ctx, profile); err != nil {
		return fmt.Errorf("creating MPINetworkProfile %s: %w", localNetwork, err)
	}
	return nil
}

// localRuntimes are the sample runtimes installed for the real nodes, as
// <name>-local, with the MPI image built here that has their
// implementation: never pulled, on the real nodes (the only ones whose
// stores have it).
var localRuntimes = []struct{ name, image string }{
	{"torus-openmpi", mpiImage},
	{"torus-mpich", mpiTrixieImage},
	{"torus-openmpi5", mpiTrixieImage},
	{"torus-python", mpiImageNoSSH},
}

// installLocalRuntimes creates the -local runtimes: the shipped samples
// with only image, pull policy and placement changed, so that a real job
// runs exactly what users apply. Their workers spread over the real
// nodes, one per node while there are nodes without one, so that ranks
// talk across nodes.
func (c *cluster) installLocalRuntimes(ctx context.Context) error {
	for _, local := range localRuntimes {
		rt, err := samples.Runtime(local.name)
		if err != nil {
			return err
		}
		rt.Name = local.name + "-local"
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
			pod := &rj.Template.Spec.Template.Spec
			pod.NodeSelector = map[string]string{realNodeLabel: "true"}
			for j := range pod.Containers {
				pod.Containers[j].Image = local.image
				pod.Containers[j].ImagePullPolicy = corev1.PullNever
			}
			pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj.Name}},
				MatchLabelKeys: []string{jobsetv1alpha2.JobSetNameKey},
			}}
		}
		if err := c.client.Create(ctx, rt); err != nil {
			return fmt.Errorf("creating runtime %s: %w", rt.Name, err)
		}
	}
	return nil
}

const (
	// localStorageClass is the class of the real nodes' volumes: a claim
	// naming it binds one of localVolumes, as a claim of a cluster's own
	// class binds a provisioned volume. Each binds once (Retain): the
	// real-node tier makes five claims (the quick start's models and the
	// restart specs' checkpoints), and the rest are for people trying
	// things.
	localStorageClass = "local"
	localVolumes      = 8
	localVolumeSize   = "1Gi"
)

// installLocalStorage creates the storage class and its volumes: each a
// directory of the cluster's, mounted by hostPath on whichever node a pod
// runs. Every real node sees the same directory, so the volumes are
// ReadWriteMany, as the shared file systems (NFS, CephFS) are that a job
// whose ranks span nodes writes its model to.
func (c *cluster) installLocalStorage(ctx context.Context) error {
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: localStorageClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if err := c.client.Create(ctx, class); err != nil {
		return fmt.Errorf("creating StorageClass %s: %w", class.Name, err)
	}
	for i := range localVolumes {
		name := fmt.Sprintf("local-%d", i)
		path := filepath.Join(c.dir, "volumes", name)
		if err := os.MkdirAll(path, 0o755); err != nil {
			return err
		}
		// Any pod's user may write: OpenShift's assigned UIDs, images' own.
		if err := os.Chmod(path, 0o777|os.ModeSticky); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(localVolumeSize)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              localStorageClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: path, Type: ptr.To(corev1.HostPathDirectory),
				}},
			},
		}
		if err := c.client.Create(ctx, pv); err != nil {
			return fmt.Errorf("creating PersistentVolume %s: %w", name, err)
		}
	}
	return nil
}
