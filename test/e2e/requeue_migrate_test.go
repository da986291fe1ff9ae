package e2e

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/corpus"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/migrate"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

var _ = Describe("Kueue eviction", func() {
	It("requeues an evicted job, says so, and runs it again with new keys", func() {
		ns := newNamespace("evict")
		queue := newQueue(ns, 8)
		tj := wrappers.MakeTrainJob("evicted", ns).RuntimeRef("torus-openmpi-long").NumNodes(2).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: queue}
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		var firstKey []byte
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "evicted-mpi-ssh"}, &s)).To(Succeed())
			firstKey = s.Data["ssh-privatekey"]
		}, timeout, interval).Should(Succeed())

		By("Kueue evicts the whole job when its ClusterQueue is drained")
		setStopPolicy(ns, kueue.HoldAndDrain)
		Eventually(condition(tj, trainjob.ConditionAdmitted), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "Evicted"),
			HaveField("Message", ContainSubstring("Kueue evicted the job")), HaveField("Message", ContainSubstring("waits in LocalQueue")),
		))
		Eventually(func(g Gomega) { g.Expect(pods(tj)(g)).To(BeEmpty()) }, timeout, interval).Should(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "evicted-mpi-ssh"}, &corev1.Secret{}))
		}, timeout, interval).Should(BeTrue(), "no keys while the job waits")

		By("re-admitted when the queue runs again: running from the start with new keys")
		setStopPolicy(ns, kueue.None)
		Eventually(condition(tj, trainjob.ConditionAdmitted), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "evicted-mpi-ssh"}, &s)).To(Succeed())
			g.Expect(s.Data["ssh-privatekey"]).NotTo(Equal(firstKey))
		}, timeout, interval).Should(Succeed())

		By("the job's record of restarts keeps the eviction, which the Admitted condition no longer says: not counted, why, and which run it stopped")
		var got trainer.TrainJob
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tj), &got)).To(Succeed())
		rec := trainjob.RestartsOf(&got)
		Expect(rec.Evictions).To(Equal(int32(1)), "record: %+v", rec)
		Expect(rec.Total).To(BeZero(), "an eviction was taken for a restart of the JobSet")
		Expect(rec.Stops()).To(Equal(int32(1)))
		Expect(rec.Latest).To(ConsistOf(And(
			HaveField("Run", int32(0)), HaveField("Evicted", true), HaveField("Counted", HaveValue(BeFalse())),
			HaveField("Cause", Not(BeEmpty())),
		)))
		Eventually(condition(tj, trainjob.ConditionRestarted), timeout, interval).Should(And(
			HaveField("Reason", trainjob.ReasonEvicted),
			HaveField("Message", MatchRegexp(`^0 restarts, 0 counted against the budget of 0, evicted by Kueue 1 time\nrun 0 stopped \S+ \(evicted by Kueue\): \w+: `)),
		))
		Eventually(func(g Gomega) []string {
			var list corev1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				reasons = append(reasons, e.Reason)
			}
			return reasons
		}, timeout, interval).Should(ContainElement("Requeued"))
	})
})

var _ = Describe("Kueue eviction the operator does not see", func() {
	It("gives the run Kueue starts again new keys before any of its pods leaves the gate", func() {
		ns := newNamespace("evict-unseen")
		queue := newQueue(ns, 8)
		tj := wrappers.MakeTrainJob("unseen", ns).RuntimeRef("torus-openmpi-long").NumNodes(2).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: queue}
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		var first corev1.Secret
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: mpi.SSHSecretName(tj.Name)}, &first)).To(Succeed())
		var reservedAt metav1.Time
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(workloadOf(g, ns).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			reservedAt = c.LastTransitionTime
		}, timeout, interval).Should(Succeed())

		By("Kueue evicts the job and admits it again while the operator is stopped")
		// The operator stays stopped for as little as the test can: well
		// within its leader election's renew deadline.
		resume := stopOperator()
		DeferCleanup(resume)
		setStopPolicy(ns, kueue.HoldAndDrain)
		Eventually(func(g Gomega) {
			g.Expect(meta.IsStatusConditionTrue(workloadOf(g, ns).Status.Conditions, kueue.WorkloadEvicted)).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		setStopPolicy(ns, kueue.None)
		// The new run's workers are created behind Torus's gate: the
		// operator's pod webhook does not answer, and its failure policy
		// keeps the pod as it came. Its launcher waits for them (JobSet's
		// dependsOn, as the operator orders them on nodes that run no
		// containers). The evicted run's pods are on their way out.
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(workloadOf(g, ns).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.LastTransitionTime.After(reservedAt.Time)).To(BeTrue(), "a new reservation")
			var live []corev1.Pod
			for _, p := range pods(tj)(g) {
				if p.DeletionTimestamp.IsZero() {
					live = append(live, p)
				}
			}
			g.Expect(live).To(HaveLen(2))
			for _, p := range live {
				g.Expect(p.Spec.SchedulingGates).To(ContainElement(HaveField("Name", api.SchedulingGateSSHKeys)), "pod %s", p.Name)
			}
		}, timeout, interval).Should(Succeed())
		resume()

		By("the operator replaces the evicted run's keys, then lets the pods start")
		// The job's status still says Running from before the eviction,
		// which the operator never saw: what shows the new run is its
		// keys and its pods.
		var now corev1.Secret
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: mpi.SSHSecretName(tj.Name)}, &now)).To(Succeed())
			g.Expect(now.UID).NotTo(Equal(first.UID), "the Secret of the evicted run")
		}, timeout, interval).Should(Succeed())
		Expect(now.Data["ssh-privatekey"]).NotTo(Equal(first.Data["ssh-privatekey"]))
		Eventually(func(g Gomega) {
			ps := pods(tj)(g)
			g.Expect(ps).To(HaveLen(3))
			for _, p := range ps {
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s", p.Name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			}
		}, timeout, interval).Should(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
	})
})

// setStopPolicy sets the stop policy of the ClusterQueue newQueue made for
// namespace ns.
func setStopPolicy(ns string, p kueue.StopPolicy) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var cq kueue.ClusterQueue
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &cq)).To(Succeed())
		cq.Spec.StopPolicy = &p
		g.Expect(k8sClient.Update(ctx, &cq)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// workloadOf is the one Kueue workload of namespace ns.
func workloadOf(g Gomega, ns string) *kueue.Workload {
	var list kueue.WorkloadList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	return &list.Items[0]
}

// stopOperator stops the local cluster's operator (SIGSTOP, by the PID its
// supervisor keeps) and returns what continues it, once however often it
// is called.
func stopOperator() func() {
	GinkgoHelper()
	rec, err := supervisor.ReadPIDFile(filepath.Join(filepath.Dir(clusterKubeconfig()), "pids", "torus-operator.pid"))
	Expect(err).NotTo(HaveOccurred())
	Expect(rec.Alive()).To(BeTrue(), "the operator, pid %d", rec.PID)
	Expect(syscall.Kill(rec.PID, syscall.SIGSTOP)).To(Succeed())
	var once sync.Once
	return func() {
		once.Do(func() {
			Expect(rec.Alive()).To(BeTrue(), "the operator, pid %d, died while stopped", rec.PID)
			Expect(syscall.Kill(rec.PID, syscall.SIGCONT)).To(Succeed())
		})
	}
}

var _ = Describe("A migrated MPIJob", func() {
	It("runs to Complete", func() {
		ns := newNamespace("migrated")
		data, err := os.ReadFile(filepath.Join(corpus.Dir("mpijob-v2beta1"), "pi.yaml"))
		Expect(err).NotTo(HaveOccurred(), "the shared MPIJob corpus")
		items := migrate.File("pi.yaml", data, migrate.Options{})
		Expect(items).To(HaveLen(1))
		res := items[0].Result
		Expect(res).NotTo(BeNil())
		Expect(res.Err()).NotTo(HaveOccurred())
		if rt := res.Runtime; rt != nil {
			rt.Namespace = ns
			Expect(k8sClient.Create(ctx, rt)).To(Succeed())
		}
		tj := res.TrainJob
		tj.Namespace = ns
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainer.TrainJobComplete), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		ranBeforeCompleting(tj)
	})
})
