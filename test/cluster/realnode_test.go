package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// hostState is what a real node could leave behind on the machine.
type hostState struct {
	Links   []string
	Mounts  []string
	Cgroups []string
	Sysctls map[string]string
	Paths   map[string]bool
}

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
	s.Cgroups = cgroups
	for _, k := range []string{
		"net/ipv4/ip_forward", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	} {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		Expect(err).NotTo(HaveOccurred())
		s.Sysctls[k] = strings.TrimSpace(string(v))
	}
	for _, p := range []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet"} {
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

// expectNoTrace fails unless the machine is as before the real node ran.
func expectNoTrace(before hostState) {
	GinkgoHelper()
	after := snapshotHost()
	Expect(after.Links).To(Equal(before.Links), "network links")
	Expect(after.Mounts).To(Equal(before.Mounts), "mounts")
	Expect(after.Cgroups).To(Equal(before.Cgroups), "kubepods cgroups")
	Expect(after.Sysctls).To(Equal(before.Sysctls), "sysctls")
	Expect(after.Paths).To(Equal(before.Paths), "paths the kubelet and containerd use")
}

const realNodePods = `
apiVersion: v1
kind: Pod
metadata: {name: hostname, namespace: default}
spec:
  restartPolicy: Never
  nodeSelector: {torus-mpi.io/real-node: "true"}
  tolerations: [{key: torus-mpi.io/real-node, operator: Exists}]
  containers:
  - {name: main, image: registry.torus.local/tiny:1, imagePullPolicy: Never, args: [hostname]}
---
apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: default}
spec:
  nodeSelector: {torus-mpi.io/real-node: "true"}
  tolerations: [{key: torus-mpi.io/real-node, operator: Exists}]
  containers:
  - {name: main, image: registry.torus.local/tiny:1, imagePullPolicy: Never, args: [pause]}
`

var _ = Describe("hack/cluster with a real node", Ordered, func() {
	var dir string
	var before hostState

	BeforeAll(func() {
		if os.Geteuid() != 0 {
			Skip("the real node needs root")
		}
		_, err := os.Stat(filepath.Join(testbin, "kubelet"))
		Expect(err).NotTo(HaveOccurred(), "kubelet is missing: run hack/testbin/build.sh node")
		dir = filepath.Join(GinkgoT().TempDir(), "cluster")
		before = snapshotHost()
		DeferCleanup(func() { clusterCmd(dir, "down") })
	})

	It("runs pods in real containers, with logs and exec through the kubelet", func() {
		out, code := clusterCmd(dir, "up", "-operator", operator, "-real-node")
		Expect(code).To(Equal(0), "cluster up -real-node failed:\n%s", out)
		out, code = clusterCmd(dir, "status")
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchRegexp(`kubelet\s+running`))

		manifest := filepath.Join(dir, "pods.yaml")
		Expect(os.WriteFile(manifest, []byte(realNodePods), 0o644)).To(Succeed())
		_, code = kubectl(dir, "apply", "-f", manifest)
		Expect(code).To(Equal(0))
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "pod", "hostname", "-o", "jsonpath={.status.phase}")
			return out
		}, time.Minute, time.Second).Should(Equal("Succeeded"))
		_, code = kubectl(dir, "wait", "pod/sleeper", "--for=condition=Ready", "--timeout=60s")
		Expect(code).To(Equal(0))

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

		By("pod addresses on the cluster's bridge, and the cluster's DNS")
		out, _ = kubectl(dir, "get", "pod", "sleeper", "-o", "jsonpath={.status.podIP}")
		Expect(out).To(HavePrefix("10.234.0."))
		out, code = kubectl(dir, "exec", "sleeper", "--", "/usr/bin/tiny", "lookup", "kubernetes.default")
		Expect(code).To(Equal(0))
		Expect(strings.TrimSpace(out)).To(Equal("10.96.0.1"))
		_, code = kubectl(dir, "exec", "sleeper", "--", "/usr/bin/tiny", "lookup", "example.com")
		Expect(code).NotTo(Equal(0), "a name beyond the cluster was answered: DNS must not forward off the machine")
	})

	It("runs an Open MPI job through Torus in real containers: real sshd on the workers, real mpirun in the launcher", func() {
		By("the runtime for the real node: the sample Open MPI runtime on the MPI image built here")
		out, code := kubectl(dir, "get", "clustertrainingruntime", "torus-openmpi-local", "-o", "jsonpath={.spec.template.spec.replicatedJobs[*].template.spec.template.spec.containers[0].image}")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("registry.torus.local/mpi:1 registry.torus.local/mpi:1"))

		By("kubectl mpi run --wait: 2 workers x 2 slots, pi from 4 ranks")
		runOut, code := kubectlMPI(dir, "run", "pi-real", "--runtime", "torus-openmpi-local", "--image", "registry.torus.local/mpi:1",
			"--workers", "2", "--slots-per-worker", "2", "--wait", "--timeout", "3m",
			"--", "mpirun", "-n", "4", "python3", "/opt/torus/pi.py", "200000")
		if code != 0 {
			describe, _ := kubectlMPI(dir, "describe", "pi-real")
			Fail(fmt.Sprintf("the job did not complete (exit %d):\n%s\n%s", code, runOut, describe))
		}
		logs, code := kubectlMPI(dir, "logs", "pi-real")
		Expect(code).To(Equal(0), logs)
		Expect(logs).To(MatchRegexp(`pi is 3\.14159265\d+ from 4 ranks`))
		Expect(logs).To(MatchRegexp(`ranks 0,1 on pi-real-node-0-0`))
		Expect(logs).To(MatchRegexp(`ranks 2,3 on pi-real-node-0-1`))
	})

	It("reaches a running job's ranks through the kubelet: exec-rank with exit codes, logs", func() {
		// The launcher holds the job open until it is deleted.
		_, code := kubectlMPI(dir, "run", "held", "--runtime", "torus-openmpi-local", "--image", "registry.torus.local/mpi:1",
			"--workers", "2", "--slots-per-worker", "2", "--", "sleep", "600")
		Expect(code).To(Equal(0))
		DeferCleanup(func() { kubectlMPI(dir, "delete", "held", "--wait") })
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "trainjob", "held", "-o", `jsonpath={.status.conditions[?(@.type=="Running")].status}`)
			return out
		}, 2*time.Minute, time.Second).Should(Equal("True"))

		By("rank 3 lives on worker-1: its own host name, answered from its container")
		out, code := kubectlMPI(dir, "exec-rank", "held", "3", "-q", "--", "hostname")
		Expect(code).To(Equal(0))
		Expect(strings.TrimSpace(out)).To(Equal("held-node-0-1"))
		By("the command's exit code passes through")
		_, code = kubectlMPI(dir, "exec-rank", "held", "0", "-q", "--", "sh", "-c", "exit 3")
		Expect(code).To(Equal(3))
		By("every worker at once")
		out, code = kubectlMPI(dir, "exec-rank", "held", "--all", "--", "hostname")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("[worker-0] held-node-0-0"))
		Expect(out).To(ContainSubstring("[worker-1] held-node-0-1"))
		By("sshd's own words in the workers' logs")
		out, code = kubectlMPI(dir, "logs", "held")
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`\[worker-0\] Server listening on .* port 2222`))
	})

	It("leaves no trace on the machine after down", func() {
		out, code := clusterCmd(dir, "down")
		Expect(code).To(Equal(0), out)
		Expect(out).NotTo(ContainSubstring("cleaning up after the real node"))
		expectNoTrace(before)
		ps, err := exec.Command("ps", "-eo", "args").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(ps)).NotTo(ContainSubstring(filepath.Join(dir, "node")), "a process of the node outlived down")
	})

	It("leaves no trace either when a start with a real node fails", func() {
		out, code := clusterCmd(dir, "up", "-real-node", "-operator", brokenOperator())
		Expect(code).NotTo(Equal(0), "cluster up reported a cluster without its operator as up:\n%s", out)
		Expect(out).To(ContainSubstring("torus-operator exited during start-up"))
		Expect(out).To(MatchRegexp(`started kubelet\s+pid`), "the real node was started before the operator failed")
		expectNoTrace(before)
	})
})
