package main

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/images"
	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/hack/supervisor"
	"github.com/torus-mpi/torus/samples"
)

// The real node: a kubelet and containerd (runc, the CNI bridge plugin)
// beside the kwok nodes, so that pods really run. Both share a private
// mount and PID namespace: every path the kubelet or containerd hard-codes
// (/run/containerd, /run/netns, /var/lib/cni, /var/log/containers,
// /var/lib/kubelet) is a tmpfs there, and stopping containerd (that
// namespace's first process) ends every shim and container with it. What
// the host still sees — the pod bridge, cgroups, sysctls the kubelet sets,
// directories made for those mounts — is recorded and undone by down.
const (
	realNodeName = "real-node-0"
	// bridgeName and podSubnet: pods talk to each other on a bridge the
	// cluster creates, with no route off it (ip_forward stays as it is).
	// The host's address on it, nodeIP, is the kubelet's: the kubelet
	// refuses a loopback node IP, and the API server reaches it there
	// (logs, exec) without leaving the machine.
	bridgeName = "torus0"
	podSubnet  = "10.234.0.0/24"
	nodeIP     = "10.234.0.1"
	// bridgeMAC is set, not left to the kernel: a bridge without one takes
	// the lowest MAC of its ports, so deleting the pod whose veth holds it
	// changes the node's MAC under every other pod, whose ARP entry then
	// sends DNS to an address nobody answers (tens of seconds of "Temporary
	// failure in name resolution" until the entry expires). Locally
	// administered: "torus" in ASCII.
	bridgeMAC = "02:74:6f:72:75:73"
	// Images of the node's store, imported from archives built here.
	pauseImage = "registry.torus.local/pause:1"
	tinyImage  = "registry.torus.local/tiny:1"
	// mpiImage: Debian bookworm with Open MPI 4, OpenSSH, mpi4py and
	// /opt/torus/pi.py; mpiTrixieImage: Debian trixie with MPICH 4.2,
	// Open MPI 5 and /opt/torus/pi-mpich, pi-openmpi5. Both run as
	// mpiuser (1000). See hack/images/mpi/build.sh.
	mpiImage       = "registry.torus.local/mpi:1"
	mpiTrixieImage = "registry.torus.local/mpi-trixie:1"
	// realNodeLabel marks the real node, for pods that must run there
	// (images only its store has).
	realNodeLabel = "torus-mpi.io/real-node"
)

// hostPaths are mounted over with tmpfs in the node's mount namespace.
var hostPaths = []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/log/containers", "/var/lib/kubelet"}

// kernelTunables are the sysctls the kubelet sets at start
// (protectKernelDefaults false); down puts back what they were.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostClaim names the cluster directory whose real node owns what the
// machine has one of (the bridge, the kubepods cgroups, the kubelet's
// sysctls): two real nodes at once would share and then delete them under
// each other. Under /run, so a reboot, which ends both the node and its
// bridge, ends the claim too.
const hostClaim = "/run/torus-real-node"

// nodeTraces is what the node leaves on the host, kept in node.json for
// down.
type nodeTraces struct {
	CreatedDirs []string          `json:"createdDirs"`
	Sysctls     map[string]string `json:"sysctls"`
}

func (c *cluster) nodeDir(parts ...string) string {
	return filepath.Join(append([]string{c.dir, "node"}, parts...)...)
}

// nodeCheck says why a real node cannot run on this machine, if it
// cannot: what it needs that is missing, or a host that would drop its
// pods' traffic.
func (c *cluster) nodeCheck(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the real node needs root (containerd, runc, mounts, cgroups)")
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s is missing: run make node-deps (Debian's containerd, runc, containernetworking-plugins)", b)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return errors.New("/usr/lib/cni/bridge is missing: run make node-deps")
	}
	if _, err := os.Stat(c.bin("kubelet")); err != nil {
		return fmt.Errorf("%s is missing: run make node-deps", c.bin("kubelet"))
	}
	return bridgeFiltered(ctx)
}

// prepareRealNode makes the node's network before the control plane
// starts: the API server listens on the node's address, where pods reach
// it (there is no kube-proxy to take them from the kubernetes Service's
// address to 127.0.0.1).
func (c *cluster) prepareRealNode(ctx context.Context) error {
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
		// by a real node from before the claim.
		if out, err := exec.CommandContext(ctx, "ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			return fmt.Errorf("deleting bridge %s, which no cluster claims: %w: %s", bridgeName, err, out)
		}
		c.logf("deleted bridge %s, which no cluster claimed", bridgeName)
	}
	// The bridge is made here, with the node's address, rather than by the
	// CNI plugin: its isGateway would also turn on ip_forward.
	for _, args := range [][]string{
		{"link", "add", bridgeName, "address", bridgeMAC, "type", "bridge"},
		{"addr", "add", nodeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func (c *cluster) startRealNode(ctx context.Context) error {
	for _, d := range []string{"containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "images"} {
		if err := os.MkdirAll(c.nodeDir(d), 0o755); err != nil {
			return err
		}
	}
	archive, err := c.buildImages(ctx)
	if err != nil {
		return fmt.Errorf("building the node's images: %w", err)
	}
	containerd, err := c.startContainerd(ctx)
	if err != nil {
		return err
	}
	archives := []string{archive}
	if c.operatorImage != "" {
		a, err := c.operatorImageArchive()
		switch {
		case err != nil && c.operatorImageDefault:
			c.logf("no operator image on the node: %v", err)
		case err != nil:
			return fmt.Errorf("the operator image: %w", err)
		default:
			archives = append(archives, a)
		}
	}
	for _, img := range []struct{ suite, tag string }{{"bookworm", mpiImage}, {"trixie", mpiTrixieImage}} {
		a, err := c.mpiImageArchive(ctx, img.suite, img.tag)
		if err != nil {
			return fmt.Errorf("the MPI image %s: %w", img.tag, err)
		}
		archives = append(archives, a)
	}
	for _, a := range archives {
		start := time.Now()
		if out, err := exec.CommandContext(ctx, "ctr", "--address", c.nodeDir("containerd.sock"), "-n", "k8s.io",
			"images", "import", a).CombinedOutput(); err != nil {
			return fmt.Errorf("importing %s: %w: %s", a, err, out)
		}
		c.logf("imported %s in %.1fs", filepath.Base(a), time.Since(start).Seconds())
	}
	if err := c.startCoreDNS(ctx); err != nil {
		return err
	}
	return c.startKubelet(ctx, containerd)
}

// bridgeFiltered fails when the host would drop traffic between pods on
// the bridge: with br_netfilter on (Docker turns it on), bridged packets
// go through iptables' FORWARD chain, whose policy such hosts set to DROP.
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
		return errors.New("the host drops forwarded packets (iptables -P FORWARD DROP) and filters bridged ones (net.bridge.bridge-nf-call-iptables=1): pods on the real node could not reach each other; set net.bridge.bridge-nf-call-iptables=0, or run without -real-node")
	}
	return nil
}

// recordTraces notes which of hostPaths exist and the kernel tunables'
// values before the node starts.
func (c *cluster) recordTraces() error {
	t := nodeTraces{Sysctls: map[string]string{}}
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

// buildImages builds the tiny static binary and writes the pause and tiny
// images to one archive.
func (c *cluster) buildImages(ctx context.Context) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	bin := c.nodeDir("images", "tiny")
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", bin, "./hack/images/tiny")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building hack/images/tiny: %w: %s", err, out)
	}
	archive := c.nodeDir("images", "images.tar")
	return archive, images.Write(archive,
		images.Image{Tag: pauseImage, Files: []images.File{{Path: "/pause", Source: bin, Mode: 0o755}}, Entrypoint: []string{"/pause"}},
		images.Image{Tag: tinyImage, Files: []images.File{{Path: "/usr/bin/tiny", Source: bin, Mode: 0o755}}, Entrypoint: []string{"/usr/bin/tiny"}},
	)
}

// operatorImageArchive wraps the operator binary as the image the bundle's
// CSV deploys (its tag read from the CSV), the way the release image holds
// it: the static binary alone, run as a non-root user. Cached outside the
// clone, keyed by the binary and the tag.
func (c *cluster) operatorImageArchive() (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	tag, err := csvImage(filepath.Join(root, "bundle", "manifests", "torus-operator.clusterserviceversion.yaml"))
	if err != nil {
		return "", err
	}
	if err := checkStatic(c.operatorImage); err != nil {
		return "", err
	}
	bin, err := os.ReadFile(c.operatorImage)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(bin, tag...))
	cache, err := imageCache()
	if err != nil {
		return "", err
	}
	archive := filepath.Join(cache, "operator-"+hex.EncodeToString(sum[:8])+".tar")
	if _, err := os.Stat(archive); err == nil {
		return archive, nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", archive, os.Getpid())
	defer os.Remove(tmp)
	if err := images.Write(tmp, images.Image{Tag: tag,
		Files: []images.File{
			{Path: "/torus-operator", Source: c.operatorImage, Mode: 0o755},
			{Path: "/licenses/LICENSE", Source: filepath.Join(root, "LICENSE"), Mode: 0o644},
		},
		Entrypoint: []string{"/torus-operator"}, User: "65532:65532"}); err != nil {
		return "", err
	}
	// One operator image at a time: earlier builds go.
	old, _ := filepath.Glob(filepath.Join(cache, "operator-*.tar"))
	for _, o := range old {
		_ = os.Remove(o)
	}
	return archive, os.Rename(tmp, archive)
}

// checkStatic refuses a binary that needs a dynamic loader: the image
// holds nothing else, and its container would fail with "exec: no such
// file or directory".
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically; the operator image holds only the binary: build it with CGO_ENABLED=0 (make build does)", path)
		}
	}
	return nil
}

// csvImage reads the image a CSV's first deployment runs.
func csvImage(path string) (string, error) {
	objs, err := repo.ReadObjects(path)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		deployments, _, _ := unstructured.NestedSlice(o.Object, "spec", "install", "spec", "deployments")
		for _, d := range deployments {
			containers, _, _ := unstructured.NestedSlice(d.(map[string]any), "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				if image, _ := ctr.(map[string]any)["image"].(string); image != "" {
					return image, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s names no deployment image", path)
}

// imageCache is where images built here are kept between clusters, as
// hack/images/mpi/build.sh keeps them ($XDG_CACHE_HOME, else ~/.cache).
func imageCache() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "torus", "images")
	return dir, os.MkdirAll(dir, 0o755)
}

// mpiImageArchive returns an MPI image as a docker archive, built from
// the root filesystem hack/images/mpi/build.sh makes of a Debian suite;
// both are cached outside the clone, keyed by what they are built from.
func (c *cluster) mpiImageArchive(ctx context.Context, suite, tag string) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "images", "mpi", "build.sh"), suite)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/images/mpi/build.sh: %w", err)
	}
	rootfs := strings.TrimSpace(string(out))
	img := images.Image{Tag: tag, Layers: []string{rootfs}, User: "1000:1000",
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/mpiuser"}}
	// Keyed by the root filesystem's recipe and by this configuration.
	cfg := sha256.Sum256([]byte(fmt.Sprint(img.Tag, img.User, img.Env)))
	archive := strings.Replace(strings.TrimSuffix(rootfs, ".tar"), "mpi-rootfs-", "mpi-image-", 1) + "-" + hex.EncodeToString(cfg[:4]) + ".tar"
	if _, err := os.Stat(archive); err == nil {
		return archive, nil
	}
	start := time.Now()
	tmp := fmt.Sprintf("%s.%d.tmp", archive, os.Getpid())
	defer os.Remove(tmp)
	if err := images.Write(tmp, img); err != nil {
		return "", err
	}
	c.logf("wrote the MPI image in %.1fs", time.Since(start).Seconds())
	return archive, os.Rename(tmp, archive)
}

// startCoreDNS serves the cluster's names to the real node's pods on the
// node's address: services, and pods by hostname and subdomain (the
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
`, nodeIP, p[0], c.kubeconfig())
			path := c.nodeDir("Corefile")
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

func (c *cluster) startContainerd(ctx context.Context) (*supervisor.Process, error) {
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "torus",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "dataDir": %q}
  }]
}
`, bridgeName, podSubnet, nodeIP, c.nodeDir("cni", "ipam"))
	if err := os.WriteFile(c.nodeDir("cni", "net.d", "10-torus.conflist"), []byte(cni), 0o644); err != nil {
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
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, c.nodeDir("containerd", "root"), c.nodeDir("containerd", "state"), c.nodeDir("containerd.sock"),
		c.nodeDir("containerd.sock.ttrpc"), pauseImage, c.nodeDir("cni", "net.d"))
	cfgFile := c.nodeDir("containerd.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	var mounts strings.Builder
	for _, p := range hostPaths {
		// One command a line: set -e does not stop at a failed left side of &&.
		fmt.Fprintf(&mounts, "mkdir -p %[1]s\nmount -t tmpfs -o mode=0755 tmpfs %[1]s\n", p)
	}
	// sh is the namespace's first process: it reaps, and when containerd
	// ends it exits, which ends every process of the namespace (the
	// kubelet, entered into it, the shims and the containers). unshare's
	// --kill-child ties sh to the recorded PID: a SIGKILL of unshare (a
	// session killed before down runs) kills sh, and with it the whole
	// node, rather than leaving a kubelet behind that would remove the
	// next node's pod cgroups as orphans. SIGTERM still stops it gently:
	// unshare blocks it, and sh forwards it to containerd.
	script := "set -e\n" + mounts.String() + fmt.Sprintf(`containerd --config %s &
pid=$!
trap 'kill -TERM $pid' TERM INT
wait $pid || true
wait $pid || true
`, cfgFile)
	p, _, err := c.run(ctx, supervisor.Component{
		Name: "containerd", Timeout: 60 * time.Second,
		Command: func(context.Context, []int) (supervisor.Spec, error) {
			return supervisor.Spec{Argv: []string{"unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc",
				"--kill-child", "/bin/sh", "-c", script}}, nil
		},
		Ready: func(ctx context.Context, _ []int) error {
			out, err := exec.CommandContext(ctx, "ctr", "--address", c.nodeDir("containerd.sock"), "version").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ctr version: %w: %s", err, out)
			}
			return nil
		},
	})
	return p, err
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

func (c *cluster) startKubelet(ctx context.Context, containerd *supervisor.Process) error {
	target, err := nsInit(containerd.PID())
	if err != nil {
		return fmt.Errorf("finding the node's namespaces: %w", err)
	}
	serving, err := c.servingCert("kubelet")
	if err != nil {
		return err
	}
	resolv := c.nodeDir("resolv.conf")
	// Pods get the cluster's DNS (clusterDNS), never the machine's.
	if err := os.WriteFile(resolv, []byte("options ndots:5\n"), 0o644); err != nil {
		return err
	}
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "kubelet", Ports: 2, Timeout: 90 * time.Second, // server, healthz
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
resolvConf: %s
clusterDomain: cluster.local
clusterDNS: [%s]
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, nodeIP, p[0], p[1], filepath.Join(serving, "tls.crt"), filepath.Join(serving, "tls.key"), c.ca.CAFile,
				c.nodeDir("containerd.sock"), c.nodeDir("pod-logs"), resolv, nodeIP)
			cfgFile := c.nodeDir("kubelet.yaml")
			if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{Argv: []string{
				"nsenter", "--target", strconv.Itoa(target), "--mount", "--pid", "--",
				c.bin("kubelet"), "--config=" + cfgFile, "--kubeconfig=" + c.kubeconfig(),
				"--root-dir=" + c.nodeDir("kubelet"), "--hostname-override=" + realNodeName,
				"--node-ip=" + nodeIP, "--node-labels=" + realNodeLabel + "=true",
			}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			if err := c.httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", p[1])); err != nil {
				return err
			}
			var node corev1.Node
			if err := c.client.Get(ctx, client.ObjectKey{Name: realNodeName}, &node); err != nil {
				return err
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("node %s not Ready", realNodeName)
		},
	})
	return err
}

// claimHost makes this cluster the machine's one real node. A claim held
// by a cluster that still runs is refused, with how to stop it; one whose
// processes are all gone (killed with the session that started them, so
// down never ran) is cleaned up first, from that cluster's own record of
// the machine's state before it.
func (c *cluster) claimHost() error {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(hostClaim, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, err = f.WriteString(c.dir + "\n")
			return errors.Join(err, f.Close())
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("claiming the machine for the real node: %w", err)
		}
		owner, err := claimOwner()
		if err != nil {
			return err
		}
		if attempt > 1 || owner == "" {
			return fmt.Errorf("%s holds %q: remove it once no real node runs on this machine", hostClaim, owner)
		}
		prev := &cluster{dir: owner}
		// Its recorded PIDs are dead; the node's namespace dies with them
		// (unshare --kill-child). Command lines naming its directory are
		// looked for too, for a node whose processes outlived them (one
		// started before --kill-child was used).
		if running := prev.running(); len(running) > 0 || nodeProcessRuns(prev.nodeDir()) {
			return fmt.Errorf("the real node of the cluster in %s runs on this machine, and there can be one at a time (its bridge %s and kubepods cgroups are the machine's); stop it first: go run ./hack/cluster down -dir %s", owner, bridgeName, owner)
		}
		if err := prev.cleanRealNode(); err != nil {
			return fmt.Errorf("cleaning up the real node that the cluster in %s left when its processes were killed: %w", owner, err)
		}
		c.logf("cleaned up the real node left by %s, whose processes had been killed", owner)
	}
}

// nodeProcessRuns reports whether a process's command line names dir,
// where a real node's kubelet and containerd keep their configuration.
func nodeProcessRuns(dir string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), dir+"/") {
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

// releaseHost deletes the bridge and the kubepods cgroups, then the claim.
func releaseHost() error {
	var errs []error
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridgeName)); err == nil {
		if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting bridge %s: %w: %s", bridgeName, err, out))
		}
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	hierarchies = append(hierarchies, "/sys/fs/cgroup")
	for _, h := range hierarchies {
		if err := removeCgroup(filepath.Join(h, "kubepods")); err != nil {
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
// machine's claim, the bridge and the kubepods cgroups. Without the claim
// those are another cluster's, and the record is stale: another start
// already cleaned up after this one.
func (c *cluster) cleanRealNode() error {
	record := filepath.Join(c.dir, "node.json")
	var t *nodeTraces
	data, err := os.ReadFile(record)
	switch {
	case err == nil:
		t = &nodeTraces{}
		if err := json.Unmarshal(data, t); err != nil {
			return fmt.Errorf("reading node.json: %w", err)
		}
	case !errors.Is(err, os.ErrNotExist):
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

// localRuntimes are the sample runtimes installed for the real node, as
// <name>-local, with the MPI image built here that has their
// implementation: never pulled, on the real node (the only one whose
// store has it).
var localRuntimes = []struct{ name, image string }{
	{"torus-openmpi", mpiImage},
	{"torus-mpich", mpiTrixieImage},
	{"torus-openmpi5", mpiTrixieImage},
}

// installLocalRuntimes creates the -local runtimes: the shipped samples
// with only image, pull policy and placement changed, so that a real job
// runs exactly what users apply.
func (c *cluster) installLocalRuntimes(ctx context.Context) error {
	for _, local := range localRuntimes {
		rt, err := samples.Runtime(local.name)
		if err != nil {
			return err
		}
		rt.Name = local.name + "-local"
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			pod.NodeSelector = map[string]string{realNodeLabel: "true"}
			for j := range pod.Containers {
				pod.Containers[j].Image = local.image
				pod.Containers[j].ImagePullPolicy = corev1.PullNever
			}
		}
		if err := c.client.Create(ctx, rt); err != nil {
			return fmt.Errorf("creating runtime %s: %w", rt.Name, err)
		}
	}
	return nil
}
