package e2e

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	trainerclient "github.com/kubeflow/trainer/v2/pkg/client/clientset/versioned"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/test/framework"
)

var _ = Describe("Torus in place of the Trainer controller", func() {
	It("runs a PyTorch TrainJob and an MPI TrainJob to Complete, both created and watched with upstream's Go clientset", func() {
		ns := newNamespace("sdk")
		// A torch runtime whose simulated pods finish after a while (the
		// kwok stage of launchers), as a real training would.
		rt := &trainer.ClusterTrainingRuntime{
			ObjectMeta: metav1.ObjectMeta{Name: "torch-" + ns},
			Spec: trainer.TrainingRuntimeSpec{
				MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
				Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
					Name: "node",
					Template: batchJobTemplate(map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"},
						corev1.Container{Name: "node", Image: "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"}),
				}}}},
			},
		}
		Expect(k8sClient.Create(ctx, rt)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, rt)).To(Succeed()) })

		cs, err := trainerclient.NewForConfig(restConfig)
		Expect(err).NotTo(HaveOccurred())
		jobs := cs.TrainerV1alpha1().TrainJobs(ns)
		w, err := jobs.Watch(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		for name, runtime := range map[string]string{"torch": rt.Name, "mpi": "torus-openmpi-e2e"} {
			_, err := jobs.Create(ctx, &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: trainer.RuntimeRef{Name: runtime},
					Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
				},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "creating TrainJob %s", name)
		}
		complete := map[string]bool{}
		Eventually(w.ResultChan(), timeout).Should(Receive(Satisfy(func(e watch.Event) bool {
			if tj, ok := e.Object.(*trainer.TrainJob); ok && meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
				complete[tj.Name] = true
			}
			return len(complete) == 2
		})), "both jobs Complete, seen through upstream's clientset")
		list, err := jobs.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(2))
		torch, err := jobs.Get(ctx, "torch", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Upstream's status model: its conditions and the JobSet's jobs.
		Expect(torch.Status.JobsStatus).To(ContainElement(HaveField("Name", "node")))
	})
})

// batchJobTemplate is a replicated job's template: one container, with the
// labels given and the kwok stage that completes launchers (the role label
// and the run duration) on its pods.
func batchJobTemplate(jobLabels map[string]string, c corev1.Container) batchv1.JobTemplateSpec {
	return batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: jobLabels},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"torus-mpi.io/role": "launcher"},
				Annotations: map[string]string{framework.KwokRunDuration: runDuration},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{c}},
		}},
	}
}
