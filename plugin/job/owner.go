package job

import (
	"context"
	"sync"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// Owner tells the pods of a job's own Jobs from pods that only wear its
// labels (trainjob.OwnPods), for commands that meet pods one at a time as
// they appear (logs -f, run -f): it reads the job's JobSet once it exists
// and each Job a pod names once. A pod it cannot place is not the job's.
type Owner struct {
	c  client.Reader
	tj *trainer.TrainJob

	mu     sync.Mutex
	jobSet *metav1.PartialObjectMetadata
	jobs   map[types.UID]bool
}

// NewOwner tells the pods of tj.
func NewOwner(c client.Reader, tj *trainer.TrainJob) *Owner {
	return &Owner{c: c, tj: tj, jobs: map[types.UID]bool{}}
}

// Owns reports whether p is a pod of one of the job's own Jobs.
func (o *Owner) Owns(ctx context.Context, p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "Job" || ref.APIVersion != "batch/v1" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if own, ok := o.jobs[ref.UID]; ok {
		return own
	}
	if o.jobSet == nil {
		js := &metav1.PartialObjectMetadata{}
		js.SetGroupVersionKind(jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"))
		if err := o.c.Get(ctx, client.ObjectKey{Namespace: o.tj.Namespace, Name: mpi.JobSetName(o.tj.Name)}, js); err != nil {
			return false
		}
		o.jobSet = js
	}
	job := &metav1.PartialObjectMetadata{}
	job.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	if err := o.c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, job); err != nil {
		return false // not remembered: the Job may not be readable yet
	}
	own := len(trainjob.OwnPods(o.tj, o.jobSet, []metav1.Object{job}, []corev1.Pod{*p})) == 1
	o.jobs[ref.UID] = own
	return own
}
