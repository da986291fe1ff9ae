package e2e

import (
	"fmt"
	"net"
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/job"
)

var _ = Describe("kubectl mpi exec-rank and top", Ordered, func() {
	var ns string
	BeforeAll(func() {
		ns = newNamespace("plugin-exec")
		succeed(mpiCmd("-n", ns, "run", "pi", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "3",
			"--slots-per-worker", "4", "--gpus", "4", "--", "mpirun", "./pi"))
		Eventually(condition(trainJobRef(ns, "pi"), trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
	})

	It("runs a command in the pod of a rank", func() {
		r := succeed(mpiCmd("-n", ns, "exec-rank", "pi", "6", "--", "sh", "-c", "echo hello from $TORUS_KWOK_EXEC"))
		Expect(r.Stdout).To(Equal("hello from 1\n"))
		Expect(r.Stderr).To(Equal(fmt.Sprintf("rank 6 runs on worker-1 (ranks 4-7), pod %s\n", podOf(ns, "pi", api.RoleWorker, 1))))

		r = mpiCmd("-n", ns, "exec-rank", "pi", "12", "--", "true")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(Equal("error: MPI job pi: rank 12 is out of range: the job has ranks 0 to 11\n"))

		// kwok reports a command's non-zero exit as an error of the exec
		// call (a kubelet reports the code, which exec-rank then exits with).
		r = mpiCmd("-n", ns, "exec-rank", "-q", "pi", "0", "--", "sh", "-c", "exit 3")
		Expect(r.Code).NotTo(Equal(0))
	})

	It("runs a command on every worker with prefixed output, failing if any fails", func() {
		r := succeed(mpiCmd("-n", ns, "exec-rank", "pi", "--all", "--", "sh", "-c", "echo one; echo two"))
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		Expect(lines).To(ConsistOf(
			"[worker-0] one", "[worker-0] two", "[worker-1] one", "[worker-1] two", "[worker-2] one", "[worker-2] two"))
		r = mpiCmd("-n", ns, "exec-rank", "pi", "--all", "--", "sh", "-c", "exit 2")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("error: the command failed on 3 of 3 workers:"))
		Expect(r.Stderr).To(ContainSubstring("worker-2: exec in pod " + podOf(ns, "pi", api.RoleWorker, 2)))
	})

	It("shows a running job's hosts from its pods' Table once the Job controller counts them ready", func() {
		var pi trainer.TrainJob
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi"}, &pi)).To(Succeed())
		// What the glance checks the rows against: each of the job's Jobs
		// counts its pods ready.
		Eventually(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: mpi.JobSetName("pi")})).To(Succeed())
			g.Expect(jobs.Items).To(HaveLen(2))
			for _, j := range jobs.Items {
				g.Expect(j.Status.Ready).To(HaveValue(BeEquivalentTo(*j.Spec.Completions)), j.Name)
			}
		}, timeout, interval).Should(Succeed())
		kube, err := kubernetes.NewForConfig(restConfig)
		Expect(err).NotTo(HaveOccurred())
		launcher, first := runningPod(&pi, api.RoleLauncher, 0), runningPod(&pi, api.RoleWorker, 0)
		// The rows are believed once no Job changes while they are read:
		// the Job controller may still write a Job after its ready count.
		Eventually(func(g Gomega) {
			glance, err := job.GlancePods(ctx, k8sClient, job.NewPodTables(kube), &pi)
			g.Expect(err).NotTo(HaveOccurred())
			// The launcher and the first worker read whole, for the
			// facts of their roles; the other workers from their rows.
			g.Expect(glance.Pods).To(HaveLen(2))
			g.Expect([]string{glance.Pods[0].Name, glance.Pods[1].Name}).To(Equal([]string{launcher.Name, first.Name}))
			for i := 1; i < 3; i++ {
				p := runningPod(&pi, api.RoleWorker, i)
				row, shown := glance.RunningOf(api.RoleWorker, int32(i))
				g.Expect(shown).To(BeTrue(), "worker-%d", i)
				g.Expect(row).To(Equal(job.RunningPod{Name: p.Name, Node: p.Spec.NodeName}))
			}
		}, timeout, interval).Should(Succeed())
		r := succeed(mpiCmd("-n", ns, "describe", "pi"))
		for i := range 3 {
			Expect(r.Stdout).To(MatchRegexp(`(?m)^\s+%d-%d\s+worker-%d\s+pi-node-0-%d-\S+\s+kwok-node-\d+\s+Running\s+0\s*$`, 4*i, 4*i+3, i, i))
		}
	})

	It("reads each pod's usage from the metrics API, or from its node through the API server's node proxy, or says why it cannot", func() {
		// kwok's nodes serve the kubelets' resource metrics
		// (test/localcluster/kwok/metrics.yaml: 250m of CPU and 64Mi a
		// container). Where the cluster gave kwok an address of its own
		// (-kwok-address, root) it also runs metrics-server, and top reads
		// the metrics API; without metrics-server, top reads the nodes
		// through the API server's node proxy, which refuses 127.0.0.1.
		launcher := runningPod(trainJobRef(ns, "pi"), api.RoleLauncher, 0)
		var node corev1.Node
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: launcher.Spec.NodeName}, &node)).To(Succeed())
		addr := nodeAddress(&node)
		Expect(addr).NotTo(BeNil(), "node %s has no InternalIP", node.Name)
		dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
		Expect(err).NotTo(HaveOccurred())
		groups, err := dc.ServerGroups()
		Expect(err).NotTo(HaveOccurred())
		metricsAPI := slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == "metrics.k8s.io" })
		if addr.IsLoopback() && !metricsAPI {
			r := mpiCmd("-n", ns, "top", "pi")
			Expect(r.Code).To(Equal(1))
			Expect(r.Stderr).To(ContainSubstring("error: cannot read pod usage: metrics.k8s.io is not served in this cluster (install metrics-server), and the fallback failed: the API server will not proxy to node kwok-node-"))
			Expect(r.Stderr).To(ContainSubstring("its address is a loopback one (as on a kwok cluster), which the node proxy refuses (address not allowed)"))
			return
		}
		source := "kubelet resource metrics through the API server's node proxy"
		if metricsAPI {
			source = "metrics.k8s.io"
		}
		// A pod's CPU is a rate: metrics-server serves a pod once it has
		// scraped its node twice since the pod ran, and top's own first
		// read may find one sample of a fresh kwok's counter; until then
		// the pod's CPU shows <pending>.
		Eventually(func(g Gomega) {
			r := mpiCmd("-n", ns, "top", "pi")
			g.Expect(r.Code).To(Equal(0), r.Stderr)
			for _, host := range []string{"launcher", "worker-0", "worker-1", "worker-2"} {
				// A counter growing at 250m a second: a rate near 250m
				// where the machine is idle. The columns: host, ranks,
				// pod, node, CPU, CPU request, memory, memory limit,
				// GPUs: each worker's 4, those of the workers shown from
				// their Table rows as the worker read whole asks.
				gpus := "4"
				if host == "launcher" {
					gpus = "0"
				}
				g.Expect(r.Stdout).To(MatchRegexp(`(?m)^%s +\S+ +\S+ +\S+ +[1-9][0-9]*m +\S+ +64Mi +\S+ +%s `, host, gpus))
			}
			g.Expect(r.Stderr).To(ContainSubstring("pi is Running; usage from " + source + "\n"))
		}, timeout, interval).Should(Succeed())
	})
})

// nodeAddress is the node's InternalIP, where the API server's node proxy
// and log reads reach its kubelet.
func nodeAddress(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return net.ParseIP(a.Address)
		}
	}
	return nil
}
