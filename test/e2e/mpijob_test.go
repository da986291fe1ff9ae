package e2e

import (
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

func gpuJob(name, ns, queue string, workers int32, gpus int64) *trainer.TrainJob {
	tj := wrappers.MakeTrainJob(name, ns).RuntimeRef("torus-openmpi-e2e").NumNodes(workers).
		Resources(corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), "nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), "nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
		}).Obj()
	tj.Labels = map[string]string{mpi.KueueQueueLabel: queue}
	return tj
}

var _ = Describe("Gang scheduling through Kueue", func() {
	It("admits a whole job or none of it, and runs the next when quota frees", func() {
		ns := newNamespace("gang")
		queue := newQueue(ns, 8)
		a := gpuJob("job-a", ns, queue, 2, 4)
		// A runs until the spec ends it, so that it holds the quota for as
		// long as B is looked at, however long Kueue takes to queue B.
		a.Spec.RuntimeRef.Name = "torus-openmpi-long"
		b := gpuJob("job-b", ns, queue, 2, 4)
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Eventually(condition(a, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(k8sClient.Create(ctx, b)).To(Succeed())

		By("B waits with Kueue's reason while A holds the quota, and has no pod at all")
		Eventually(condition(b, trainjob.ConditionAdmitted), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", And(ContainSubstring(`Waiting in LocalQueue "team"`), ContainSubstring("nvidia.com/gpu"))),
		))
		Eventually(condition(b, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Reason", "Queued"))
		Expect(pods(b)(Default)).To(BeEmpty())

		By("A completes; B is admitted as a whole and completes")
		finish(runningPod(a, api.RoleLauncher, 0))
		Eventually(condition(a, trainer.TrainJobComplete), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(condition(b, trainjob.ConditionAdmitted), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		var wls kueue.WorkloadList
		Expect(k8sClient.List(ctx, &wls, client.InNamespace(ns))).To(Succeed())
		for _, wl := range wls.Items {
			if wl.Status.Admission == nil {
				continue
			}
			counts := map[string]int32{}
			for _, psa := range wl.Status.Admission.PodSetAssignments {
				counts[string(psa.Name)] = *psa.Count
			}
			Expect(counts).To(Equal(map[string]int32{"launcher": 1, "node": 2}), "workload %s admits every pod at once", wl.Name)
		}
		Eventually(condition(b, trainer.TrainJobComplete), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
	})
})

var _ = Describe("MPI implementations", func() {
	DescribeTable("run to Complete through Kueue",
		func(runtime string) {
			ns := newNamespace("impl")
			queue := newQueue(ns, 8)
			tj := wrappers.MakeTrainJob("pi", ns).RuntimeRef(runtime).NumNodes(2).NumProcPerNode(2).Obj()
			tj.Labels = map[string]string{mpi.KueueQueueLabel: queue}
			Expect(k8sClient.Create(ctx, tj)).To(Succeed())
			Eventually(condition(tj, trainer.TrainJobComplete), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
			ranBeforeCompleting(tj)
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi-mpi-ssh"}, &corev1.Secret{}))
			}, timeout, interval).Should(BeTrue(), "keys are deleted when the job finishes")
		},
		Entry("Open MPI", "torus-openmpi-e2e"),
		Entry("Intel MPI", "torus-intelmpi-e2e"),
		Entry("MPICH", "torus-mpich-e2e"),
	)
})

var _ = Describe("Waiting", func() {
	It("says in the scheduler's words why workers no node can take are waiting", func() {
		ns := newNamespace("wait")
		// More GPUs per worker than any simulated node has; no Kueue queue,
		// so the scheduler is the one to say no.
		tj := wrappers.MakeTrainJob("greedy", ns).RuntimeRef("torus-openmpi-long").NumNodes(2).
			Resources(corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("64")}}).Obj()
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", MatchRegexp(`^worker-\d \(ranks? [\d-]+\) Unschedulable: the scheduler says: 0/\d+ nodes are available: .*Insufficient nvidia.com/gpu`)),
		))
	})
})

var _ = Describe("Scheduling timeout", func() {
	It("through Kueue: counts from admission, fails the job in the scheduler's words and gives its quota back", func() {
		ns := newNamespace("schedtimeout")
		queue := newQueue(ns, 64)
		// Kueue's quota admits 2 workers of 16 GPUs; no node has more than 8.
		tj := gpuJob("toobig", ns, queue, 2, 16)
		tj.Annotations = map[string]string{api.AnnotationSchedulingTimeout: "15s"}
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionAdmitted), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(condition(tj, trainer.TrainJobFailed), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", trainjob.ReasonSchedulingTimeout),
			HaveField("Message", MatchRegexp(`Not all ranks ran within the scheduling timeout of 15s since the job started \(.*\); it waited for: worker-\d \(ranks? [\d-]+\) Unschedulable: the scheduler says: 0/\d+ nodes are available`)),
		))
		// Its start is Kueue's admission: the time it queued does not count.
		admitted := condition(tj, trainjob.ConditionAdmitted)(Default).LastTransitionTime
		Expect(condition(tj, trainer.TrainJobFailed)(Default).Message).To(ContainSubstring(admitted.UTC().Format(time.RFC3339)))
		Eventually(func(g Gomega) {
			var q kueue.ClusterQueue
			// framework.NewQueue names the ClusterQueue after the namespace.
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &q)).To(Succeed())
			g.Expect(q.Status.AdmittedWorkloads).To(BeZero(), "the job's quota is given back")
		}, timeout, interval).Should(Succeed())
	})
})

var _ = Describe("Failures", func() {
	It("fails the job when a worker is OOMKilled, naming the rank and the fix", func() {
		ns := newNamespace("fail")
		tj := wrappers.MakeTrainJob("oom", ns).RuntimeRef("torus-openmpi-long").NumNodes(3).NumProcPerNode(4).
			Resources(corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}}).Obj()
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		inject(runningPod(tj, api.RoleWorker, 2), "oom")
		Eventually(condition(tj, trainer.TrainJobFailed), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", HavePrefix("worker-2 (ranks 8-11) OOMKilled: memory limit 16Gi exceeded; raise --memory")),
		))
	})

	It("fails the job when the launcher exits non-zero", func() {
		ns := newNamespace("fail")
		tj := wrappers.MakeTrainJob("crash", ns).RuntimeRef("torus-mpich-long").NumNodes(2).Obj()
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		inject(runningPod(tj, api.RoleLauncher, 0), "error")
		Eventually(condition(tj, trainer.TrainJobFailed), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", HavePrefix("launcher Error: container node exited with code 1; see kubectl mpi logs crash --launcher")),
		))
	})
})

var _ = Describe("Deleting a running job", func() {
	It("removes every pod, the JobSet and the Secret (keys and hostfile)", func() {
		ns := newNamespace("delete")
		tj := wrappers.MakeTrainJob("doomed", ns).RuntimeRef("torus-openmpi-long").NumNodes(2).Obj()
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(k8sClient.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(pods(tj)(g)).To(BeEmpty())
			for _, obj := range []client.Object{&jobsetv1alpha2.JobSet{}, &corev1.Secret{}} {
				name := map[string]string{"*v1alpha2.JobSet": "doomed", "*v1.Secret": "doomed-mpi-ssh"}
				key := client.ObjectKey{Namespace: ns, Name: name[typeName(obj)]}
				g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key, obj))).To(BeTrue(), "%T %s still exists", obj, key.Name)
			}
		}, timeout, interval).Should(Succeed())
	})
})
