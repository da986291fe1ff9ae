package framework

import (
	"context"
	"path/filepath"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// CreateSampleRuntimes creates the shipped ClusterTrainingRuntimes
// (samples/runtimes), as a cluster admin installs them.
func CreateSampleRuntimes(ctx context.Context, c client.Client) {
	ginkgo.GinkgoHelper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "samples", "runtimes", "*.yaml"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(files).NotTo(gomega.BeEmpty())
	for _, f := range files {
		var rt trainer.ClusterTrainingRuntime
		DecodeFile(f, &rt)
		gomega.Expect(c.Create(ctx, &rt)).To(gomega.Succeed(), "creating %s", f)
	}
}

// Condition polls a TrainJob's condition of a type, for Eventually.
func Condition(ctx context.Context, c client.Client, tj *trainer.TrainJob, typ string) func(gomega.Gomega) *metav1.Condition {
	return func(g gomega.Gomega) *metav1.Condition {
		var got trainer.TrainJob
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tj), &got)).To(gomega.Succeed())
		cond := meta.FindStatusCondition(got.Status.Conditions, typ)
		g.Expect(cond).NotTo(gomega.BeNil(), "%s has no %s condition yet; conditions: %v", tj.Name, typ, got.Status.Conditions)
		return cond
	}
}

// ObserveJobSet plays the JobSet controller's first reconcile of a job's
// JobSet, which envtest does not run: once the JobSet exists, it records a
// status for each replicated job with nothing active yet.
func ObserveJobSet(ctx context.Context, c client.Client, tj *trainer.TrainJob) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		var js jobsetv1alpha2.JobSet
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Name}, &js)).To(gomega.Succeed())
		js.Status.ReplicatedJobsStatus = nil
		for _, rj := range js.Spec.ReplicatedJobs {
			js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: rj.Name})
		}
		g.Expect(c.Status().Update(ctx, &js)).To(gomega.Succeed())
	}, Timeout, Interval).Should(gomega.Succeed())
}

// EventReasons polls the reasons of the events about an object, for
// Eventually.
func EventReasons(ctx context.Context, c client.Client, obj client.Object) func(gomega.Gomega) []string {
	return func(g gomega.Gomega) []string {
		var list eventsv1.EventList
		g.Expect(c.List(ctx, &list, client.InNamespace(obj.GetNamespace()))).To(gomega.Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == obj.GetName() {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}

// JobOf plays the JobSet controller for one replicated job of a TrainJob's
// JobSet, which envtest does not run: it creates the Job the JobSet
// controller would (once; suspended, since no Job controller runs either),
// controlled by the JobSet and labelled with its name, and returns it.
// Pods a spec makes for the job name it as their controller (ControlledBy):
// Torus counts no other pod as the job's.
func JobOf(ctx context.Context, c client.Client, tj *trainer.TrainJob, replicatedJob string) *batchv1.Job {
	ginkgo.GinkgoHelper()
	var js jobsetv1alpha2.JobSet
	gomega.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Name}, &js)
	}, Timeout, Interval).Should(gomega.Succeed())
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: js.Name + "-" + replicatedJob + "-0", Namespace: js.Namespace,
			Labels:          map[string]string{jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.ReplicatedJobNameKey: replicatedJob},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&js, jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"))},
		},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "node", Image: "mpi"}},
			}},
		},
	}
	// Its counts and indexes as the JobSet controller gives them.
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == replicatedJob {
			t := rj.Template.Spec
			job.Spec.Completions, job.Spec.Parallelism, job.Spec.CompletionMode = t.Completions, t.Parallelism, t.CompletionMode
		}
	}
	if err := c.Create(ctx, job); apierrors.IsAlreadyExists(err) {
		gomega.Expect(c.Get(ctx, client.ObjectKeyFromObject(job), job)).To(gomega.Succeed())
	} else {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	return job
}

// ControlledBy makes a pod one of a Job's, as the Job controller does.
func ControlledBy(pod *corev1.Pod, job *batchv1.Job) {
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
}
