package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/framework"
)

// hostState is what a real node could leave behind on the machine.
type hostState struct {
	Links   []string
	Mounts  []string
	Cgroups []string
	Routes  []string
	// Firewall is the host's iptables rules and ipsets: the policy agent
	// writes its own inside each node's network namespace only.
	Firewall []string
	Sysctls  map[string]string
	Paths    map[string]bool
}

// kwokGuardRule matches the rule with which a local cluster started with
// -kwok-address guards kwok's address against other interfaces. make test
// runs the e2e suite's cluster, which has one, beside this tier, whose
// clusters have none: that cluster adds and removes its rule while a real
// node runs here, so the rule is no trace of a real node's.
var kwokGuardRule = regexp.MustCompile(`^-A INPUT -d [0-9.]+/32 ! -i lo -j DROP$`)

func snapshotHost() hostState {
	GinkgoHelper()
	s := hostState{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	Expect(err).NotTo(HaveOccurred())
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// "3: torus0: <BROADCAST,...> ..." -> the name.
		if f := strings.Fields(l); len(f) > 1 {
			s.Links = append(s.Links, strings.TrimSuffix(f[1], ":"))
		}
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	Expect(err).NotTo(HaveOccurred())
	for _, m := range strings.Split(strings.TrimSpace(string(mounts)), "\n") {
		s.Mounts = append(s.Mounts, m)
	}
	cgroups, err := filepath.Glob("/sys/fs/cgroup/*/kubepods*")
	Expect(err).NotTo(HaveOccurred())
	roots, err := filepath.Glob("/sys/fs/cgroup/*/torus-real-node-*")
	Expect(err).NotTo(HaveOccurred())
	s.Cgroups = append(cgroups, roots...)
	routes, err := exec.Command("ip", "route", "show").Output()
	Expect(err).NotTo(HaveOccurred())
	s.Routes = strings.Split(strings.TrimSpace(string(routes)), "\n")
	for _, table := range []string{"filter", "nat", "mangle", "raw"} {
		if rules, err := exec.Command("iptables", "-t", table, "-S").Output(); err == nil {
			for _, r := range strings.Split(strings.TrimSpace(string(rules)), "\n") {
				if !kwokGuardRule.MatchString(r) {
					s.Firewall = append(s.Firewall, r)
				}
			}
		}
	}
	if sets, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		s.Firewall = append(s.Firewall, strings.Fields(string(sets))...)
	}
	for _, k := range []string{
		"net/ipv4/ip_forward", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	} {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		Expect(err).NotTo(HaveOccurred())
		s.Sysctls[k] = strings.TrimSpace(string(v))
	}
	for _, p := range []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/run/torus-real-node"} {
		_, err := os.Stat(p)
		s.Paths[p] = err == nil
	}
	sort.Strings(s.Links)
	sort.Strings(s.Mounts)
	return s
}

// kubectl runs the pinned kubectl against the cluster in dir.
func kubectl(dir string, args ...string) (string, int) {
	GinkgoHelper()
	return run(filepath.Join(testbin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(dir, "kubeconfig")}, args...)...)
}

// kubectlMPI runs this tree's kubectl-mpi against the cluster in dir.
func kubectlMPI(dir string, args ...string) (string, int) {
	GinkgoHelper()
	return run(filepath.Join(root, "bin", "kubectl-mpi"), append([]string{"--kubeconfig", filepath.Join(dir, "kubeconfig")}, args...)...)
}

// realNodeDir skips without root, and otherwise gives a cluster directory
// and the machine's state before a real node runs from it. A claim left by
// a cluster whose processes are all gone (a run killed before its down) is
// cleaned up first, as up would. It fails when a
// real node's bridge or claim is still on the machine: a baseline with them
// would blame the next down for what an earlier one left.
func realNodeDir() (string, hostState) {
	GinkgoHelper()
	if os.Geteuid() != 0 {
		framework.SkipRootTier("the real node needs root")
	}
	reclaimAbandonedClaim()
	claim, err := os.ReadFile("/run/torus-real-node")
	Expect(err).To(MatchError(os.ErrNotExist), "a real node's claim is on the machine (%q): an earlier cluster's down did not clean up", strings.TrimSpace(string(claim)))
	_, err = os.Stat("/sys/class/net/torus0")
	Expect(err).To(MatchError(os.ErrNotExist), "a real node's bridge torus0 is on the machine: an earlier cluster's down did not clean up")
	return filepath.Join(GinkgoT().TempDir(), "cluster"), snapshotHost()
}

// reclaimAbandonedClaim cleans up, as up would, after real nodes whose
// cluster was killed before its down. A claim whose cluster still runs is
// left alone: realNodeDir then fails, naming it.
func reclaimAbandonedClaim() {
	GinkgoHelper()
	out, code := run(clusterBin, "reclaim")
	if code != 0 {
		GinkgoWriter.Printf("the machine's real node claim stays: %s", out)
	}
}

// downLeavesNoTrace stops the cluster in dir and fails, with down's own
// words, unless it cleaned up after its real nodes and left the machine as
// it was before they ran.
func downLeavesNoTrace(dir string, before hostState) {
	GinkgoHelper()
	out, code := clusterCmd(dir, "down")
	Expect(code).To(Equal(0), out)
	Expect(out).NotTo(ContainSubstring("cleaning up after the real node"))
	expectNoTrace(before)
}

// expectNoTrace fails unless the machine is as before the real node ran.
func expectNoTrace(before hostState) {
	GinkgoHelper()
	after := snapshotHost()
	Expect(after.Links).To(Equal(before.Links), "network links")
	Expect(after.Mounts).To(Equal(before.Mounts), "mounts")
	Expect(after.Cgroups).To(Equal(before.Cgroups), "the nodes' cgroups")
	Expect(after.Routes).To(Equal(before.Routes), "routes")
	Expect(after.Firewall).To(Equal(before.Firewall), "iptables rules and ipsets")
	Expect(after.Sysctls).To(Equal(before.Sysctls), "sysctls")
	Expect(after.Paths).To(Equal(before.Paths), "paths the kubelet and containerd use")
}

const realNodePods = `
apiVersion: v1
kind: Pod
metadata: {name: hostname, namespace: default}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: registry.torus.local/tiny:1, imagePullPolicy: Never, args: [hostname]}
---
apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: default}
spec:
  containers:
  - {name: main, image: registry.torus.local/tiny:1, imagePullPolicy: Never, args: [pause]}
---
apiVersion: v1
kind: Pod
metadata: {name: gpu, namespace: default}
spec:
  containers:
  - name: main
    image: registry.torus.local/tiny:1
    imagePullPolicy: Never
    args: [pause]
    resources: {limits: {nvidia.com/gpu: "1"}}
`

// One real-node cluster serves the whole tier: bringing one up and down
// takes about half a minute, and the specs do not need one each. It keeps
// running the specs after a failure, so one broken job hides no other.
var _ = Describe("test/localcluster with a real node", Ordered, ContinueOnFailure, func() {
	var dir string
	var before hostState

	BeforeAll(func() {
		dir, before = realNodeDir()
		_, err := os.Stat(filepath.Join(testbin, "kubelet"))
		Expect(err).NotTo(HaveOccurred(), "kubelet is missing: run hack/testbin/build.sh node")
		DeferCleanup(func() { clusterCmd(dir, "down") })
		out, code := clusterCmd(dir, "up", "-operator", operator, "-real-node")
		Expect(code).To(Equal(0), "cluster up -real-node failed:\n%s", out)
	})

	It("runs pods in real containers, with logs and exec through the kubelet", func() {
		out, code := clusterCmd(dir, "status")
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchRegexp(`kubelet-0\s+running`))
		Expect(out).To(MatchRegexp(`kubelet-1\s+running`))
		Expect(out).To(MatchRegexp(`kube-router-1\s+running`))

		manifest := filepath.Join(dir, "pods.yaml")
		Expect(os.WriteFile(manifest, []byte(realNodePods), 0o644)).To(Succeed())
		_, code = kubectl(dir, "apply", "-f", manifest)
		Expect(code).To(Equal(0))
		DeferCleanup(func() { kubectl(dir, "delete", "-f", manifest, "--wait=false") })
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "pod", "hostname", "-o", "jsonpath={.status.phase}")
			return out
		}, time.Minute, time.Second).Should(Equal("Succeeded"))
		_, code = kubectl(dir, "wait", "pod/sleeper", "--for=condition=Ready", "--timeout=60s")
		Expect(code).To(Equal(0))
		By("pods that ask for no GPUs land on the real node, those that do on the simulated GPU nodes")
		out, _ = kubectl(dir, "get", "pod", "hostname", "-o", "jsonpath={.spec.nodeName}")
		Expect(out).To(HavePrefix("real-node-"))
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "pod", "gpu", "-o", "jsonpath={.spec.nodeName}")
			return out
		}, time.Minute, time.Second).Should(HavePrefix("kwok-node-"))

		By("the container's own output, read from the kubelet")
		out, code = kubectl(dir, "logs", "hostname")
		Expect(code).To(Equal(0))
		Expect(strings.TrimSpace(out)).To(Equal("hostname"), "a pod's host name is its name")

		By("exec runs in the container and passes its exit code through")
		out, code = kubectl(dir, "exec", "sleeper", "--", "/usr/bin/tiny", "echo", "from", "the", "container")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("from the container\n"))
		_, code = kubectl(dir, "exec", "sleeper", "--", "/usr/bin/tiny", "exit", "7")
		Expect(code).To(Equal(7))

		By("pod addresses behind their node's address, and the cluster's DNS")
		out, _ = kubectl(dir, "get", "pod", "sleeper", "-o", "jsonpath={.spec.nodeName} {.status.podIP}")
		Expect(out).To(MatchRegexp(`^real-node-(\d) 10\.234\.1\d\.\d+$`))
		// The host's address on the bridge keeps one MAC while nodes come
		// and go: the kernel's own word, NET_ADDR_SET (3), not the lowest
		// port's MAC that changes when that port goes (1).
		assign, err := os.ReadFile("/sys/class/net/torus0/addr_assign_type")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(assign))).To(Equal("3"), "the bridge's MAC follows its ports: a node's going can cut the others off the host's DNS")
		By("the host forwards nothing and filters nothing: each node forwards for its pods, the policy agent's rules are the nodes' own")
		now := snapshotHost()
		Expect(now.Sysctls["net/ipv4/ip_forward"]).To(Equal(before.Sysctls["net/ipv4/ip_forward"]))
		Expect(now.Firewall).To(Equal(before.Firewall))
		out, code = kubectl(dir, "exec", "sleeper", "--", "/usr/bin/tiny", "lookup", "kubernetes.default")
		Expect(code).To(Equal(0))
		Expect(strings.TrimSpace(out)).To(Equal("10.96.0.1"))
		_, code = kubectl(dir, "exec", "sleeper", "--", "/usr/bin/tiny", "lookup", "example.com")
		Expect(code).NotTo(Equal(0), "a name beyond the cluster was answered: DNS must not forward off the machine")
	})

	It("refuses a second real node while this one runs, and leaves this one as it was", func() {
		second := filepath.Join(GinkgoT().TempDir(), "second")
		out, code := clusterCmd(second, "up", "-real-node")
		Expect(code).NotTo(Equal(0), "a second real node started beside the first:\n%s", out)
		Expect(out).To(ContainSubstring("the real nodes of the cluster in %s run on the host", dir))
		Expect(out).To(ContainSubstring("stop it first: go run ./test/localcluster down -dir %s", dir))
		claim, err := os.ReadFile("/run/torus-real-node")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(claim))).To(Equal(dir))
		_, err = os.Stat("/sys/class/net/torus0")
		Expect(err).NotTo(HaveOccurred(), "the running node's bridge was deleted by the refused start")
		out, code = clusterCmd(dir, "status")
		Expect(code).To(Equal(0), out)
	})

	realNodeJobs(&dir)
	realNodeTraining(&dir)
	realNodeProgress(&dir)
	realNodeRestarts(&dir)
	realNodeBackoff(&dir)
	realNodePolicies(&dir)
	realNodeNetworks(&dir)
	realNodeChaos(&dir)
	realNodeDashboard(&dir)
	realNodeSDK(&dir)
	// Last: it ends a real node.
	realNodeLost(&dir)

	It("leaves no trace on the machine after down", func() {
		downLeavesNoTrace(dir, before)
		ps, err := exec.Command("ps", "-eo", "args").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(ps)).NotTo(ContainSubstring(filepath.Join(dir, "node-")), "a process of a node outlived down")
	})

	It("ends a real node whose recorded processes are killed, and cleans up after it at the next start, and after that start when it fails", func() {
		killed := filepath.Join(GinkgoT().TempDir(), "killed")
		out, code := clusterCmd(killed, "up", "-real-node")
		Expect(code).To(Equal(0), out)
		By("killing every process it recorded, as the end of a session does: down never runs")
		pids := readPIDs(killed)
		Expect(pids).To(HaveKey("kubelet-1"))
		for _, r := range pids {
			Expect(syscall.Kill(r.PID, syscall.SIGKILL)).To(Succeed())
		}
		// A killed process ends once the system call it is in returns: an
		// fsync of etcd's or containerd's on a busy disk can hold it for
		// seconds, and a container freeing its memory takes a while on a
		// loaded machine (test/localcluster gives the nodes' processes 30 s,
		// nodeExitGrace, before it kills them by cgroup).
		for name, r := range pids {
			Eventually(r.Alive, 30*time.Second).Should(BeFalse(), "%s (pid %d) survived SIGKILL", name, r.PID)
		}
		// The kubelet, containerd, its shims and the containers are not
		// among the recorded PIDs: they end with the node's PID namespace.
		Eventually(func() string {
			ps, err := exec.Command("ps", "-eo", "pid,args").Output()
			Expect(err).NotTo(HaveOccurred())
			var left []string
			for _, l := range strings.Split(string(ps), "\n") {
				if strings.Contains(l, filepath.Join(killed, "node-")) {
					left = append(left, l)
				}
			}
			return strings.Join(left, "\n")
		}, time.Minute, 200*time.Millisecond).Should(BeEmpty(), "processes of the killed node outlived it")
		_, err := os.Stat("/sys/class/net/torus0")
		Expect(err).NotTo(HaveOccurred(), "the killed node's bridge")

		By("a start from another directory")
		out, code = clusterCmd(dir, "up", "-real-node", "-operator", brokenOperator())
		Expect(out).To(ContainSubstring("cleaned up the real node left by %s, whose processes had been killed", killed))
		Expect(out).To(MatchRegexp(`started kubelet-0\s+pid`), "the new start ran its own real nodes")
		Expect(code).NotTo(Equal(0), "cluster up reported a cluster without its operator as up:\n%s", out)
		Expect(out).To(ContainSubstring("torus-operator exited during start-up"))
		expectNoTrace(before)
		for _, n := range []string{"node-0", "node-1"} {
			_, err := os.Stat(filepath.Join(killed, n))
			Expect(err).To(MatchError(os.ErrNotExist), "the killed cluster's %s, its image store, outlived the clean-up", n)
		}
		Expect(filepath.Join(killed, "logs", "kubelet-1.log")).To(BeAnExistingFile(), "the killed cluster's logs went with its nodes")
		out, code = clusterCmd(killed, "down")
		Expect(code).To(Equal(0), out)
		Expect(out).NotTo(ContainSubstring("cleaning up after the real node"))
		expectNoTrace(before)
	})
})
