// Package job reads MPI TrainJobs the way people think of them: the
// launcher and workers with their ranks, the pods behind them (its state,
// trainjob.StateOf, is shared with the operator). Commands share it; it has
// no cobra in it.
package job

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// NotFoundError is a job name that names no MPI job.
type NotFoundError struct {
	Namespace, Name string
	// NotMPI: a TrainJob of that name exists but runs no MPI runtime.
	NotMPI  bool
	Runtime string
}

func (e *NotFoundError) Error() string {
	if e.NotMPI {
		return fmt.Sprintf("TrainJob %q in namespace %q is not an MPI job: its runtime %s has no mlPolicy.mpi (use kubectl get trainjobs for other jobs)", e.Name, e.Namespace, e.Runtime)
	}
	return fmt.Sprintf("MPI job %q not found in namespace %q: see kubectl mpi list (-A for every namespace)", e.Name, e.Namespace)
}

// Get reads an MPI TrainJob. A TrainJob the webhook did not label as MPI is
// checked against its runtime, so jobs created before Torus was installed
// are found too.
func Get(ctx context.Context, c client.Reader, namespace, name string) (*trainer.TrainJob, error) {
	var tj trainer.TrainJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotFoundError{Namespace: namespace, Name: name}
		}
		return nil, fmt.Errorf("getting MPI job %s/%s: %w", namespace, name, err)
	}
	if _, ok := tj.Labels[api.LabelImplementation]; ok {
		return &tj, nil
	}
	rt, err := trainjob.GetRuntime(ctx, c, &tj)
	if err == nil && !rt.IsMPI() {
		return nil, &NotFoundError{Namespace: namespace, Name: name, NotMPI: true, Runtime: rt.Kind + " " + rt.Name}
	}
	return &tj, nil
}

// Info is a job with its runtime resolved: how many workers, slots and
// which implementation, and so where every rank runs.
type Info struct {
	TrainJob *trainer.TrainJob
	// Runtime is nil when it could not be read (RuntimeErr says why).
	Runtime    *mpi.Runtime
	RuntimeErr error
	// Job is the runtime merged with the TrainJob; nil without a runtime.
	Job *mpi.Job
}

// Resolve reads the job's runtime through a cache shared by many jobs.
func Resolve(ctx context.Context, runtimes *Runtimes, tj *trainer.TrainJob) *Info {
	info := &Info{TrainJob: tj}
	info.Runtime, info.RuntimeErr = runtimes.Get(ctx, tj)
	if info.RuntimeErr != nil {
		return info
	}
	if !info.Runtime.IsMPI() {
		info.RuntimeErr = fmt.Errorf("%s %q has no mlPolicy.mpi", info.Runtime.Kind, info.Runtime.Name)
		return info
	}
	info.Job, info.RuntimeErr = mpi.ResolveJob(tj, info.Runtime)
	return info
}

// Workers is the number of worker pods; without a runtime, the TrainJob's
// numNodes (0 when unknown).
func (i *Info) Workers() int32 {
	if i.Job != nil {
		return i.Job.Workers
	}
	if t := i.TrainJob.Spec.Trainer; t != nil {
		return ptr.Deref(t.NumNodes, 0)
	}
	return 0
}

// SlotsPerHost is the number of ranks per host (1 when unknown).
func (i *Info) SlotsPerHost() int32 {
	if i.Job != nil {
		return i.Job.SlotsPerHost
	}
	if t := i.TrainJob.Spec.Trainer; t != nil {
		return ptr.Deref(t.NumProcPerNode, 1)
	}
	return 1
}

// Placement lays the ranks out on the hosts.
func (i *Info) Placement() mpi.Placement {
	if i.Job != nil {
		return i.Job.Placement()
	}
	return mpi.NewPlacement(i.TrainJob.Name, i.Workers(), i.SlotsPerHost(), false)
}

// Implementation is the job's MPI implementation ("" when unknown).
func (i *Info) Implementation() mpi.Implementation {
	if i.Job != nil {
		return i.Job.Implementation
	}
	return mpi.Implementation(i.TrainJob.Labels[api.LabelImplementation])
}

// Runtimes reads runtimes once per name.
type Runtimes struct {
	c     client.Reader
	cache map[string]runtimeResult
}

type runtimeResult struct {
	rt  *mpi.Runtime
	err error
}

// NewRuntimes caches runtimes read through c.
func NewRuntimes(c client.Reader) *Runtimes {
	return &Runtimes{c: c, cache: map[string]runtimeResult{}}
}

// Get returns the runtime a TrainJob refers to.
func (r *Runtimes) Get(ctx context.Context, tj *trainer.TrainJob) (*mpi.Runtime, error) {
	kind := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
	ns := tj.Namespace
	if kind == trainer.ClusterTrainingRuntimeKind {
		ns = ""
	}
	key := kind + "/" + ns + "/" + tj.Spec.RuntimeRef.Name
	if res, ok := r.cache[key]; ok {
		return res.rt, res.err
	}
	rt, err := trainjob.GetRuntime(ctx, r.c, tj)
	r.cache[key] = runtimeResult{rt, err}
	return rt, err
}

// Pods lists a job's pods, launcher first, then workers by index, newest
// first within a host: the pods of the Jobs of the JobSet the TrainJob
// controls (trainjob.OwnPods), not whatever wears its labels. A job without
// a JobSet has none. A reader that keeps the pods in memory (the
// dashboard's feed of an open page) shares its own: the caller reads them
// and never writes them.
func Pods(ctx context.Context, c client.Reader, tj *trainer.TrainJob) ([]corev1.Pod, error) {
	js, err := jobSetOf(ctx, c, tj)
	if js == nil || err != nil {
		return nil, err
	}
	jobs := &metav1.PartialObjectMetadataList{}
	jobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
	if err := c.List(ctx, jobs, client.InNamespace(tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name}); err != nil {
		return nil, fmt.Errorf("listing the Jobs of MPI job %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(tj.Namespace), client.MatchingLabels{api.LabelJobName: tj.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the pods of MPI job %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	owners := make([]metav1.Object, len(jobs.Items))
	for i := range jobs.Items {
		owners[i] = &jobs.Items[i]
	}
	pods := trainjob.OwnPods(tj, js, owners, list.Items)
	SortPods(pods)
	return pods, nil
}

// jobSetOf reads the metadata of a job's JobSet; nil when it has none.
func jobSetOf(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (*metav1.PartialObjectMetadata, error) {
	js := &metav1.PartialObjectMetadata{}
	js.SetGroupVersionKind(jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"))
	switch err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: mpi.JobSetName(tj.Name)}, js); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the JobSet of MPI job %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return js, nil
}

// SortPods orders pods launcher first, then workers by index, newest first
// within a host.
func SortPods(pods []corev1.Pod) {
	sort.SliceStable(pods, func(a, b int) bool {
		pa, pb := &pods[a], &pods[b]
		ra, rb := pa.Labels[api.LabelRole] == api.RoleLauncher, pb.Labels[api.LabelRole] == api.RoleLauncher
		if ra != rb {
			return ra
		}
		if ia, ib := Index(pa), Index(pb); ia != ib {
			return ia < ib
		}
		if !pa.CreationTimestamp.Equal(&pb.CreationTimestamp) {
			return pb.CreationTimestamp.Before(&pa.CreationTimestamp)
		}
		return pa.Name < pb.Name
	})
}

// Index is a pod's completion index within its replicated job.
func Index(p *corev1.Pod) int32 {
	v, ok := p.Labels[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		v = p.Annotations[batchv1.JobCompletionIndexAnnotation]
	}
	i, _ := strconv.Atoi(v)
	return int32(i)
}

// Hosts are every host of a job: the launcher first, whether or not it
// runs ranks, then the hosts of placement.
func Hosts(placement mpi.Placement) []mpi.Host {
	if len(placement.Hosts) > 0 && placement.Hosts[0].Role == api.RoleLauncher {
		return placement.Hosts
	}
	return append([]mpi.Host{{Role: api.RoleLauncher, ReplicatedJob: mpi.LauncherJob}}, placement.Hosts...)
}

// HostOf is the MPI host a pod is.
func HostOf(p *corev1.Pod) mpi.Host {
	return mpi.Host{Role: p.Labels[api.LabelRole], Index: Index(p)}
}

// hostName is how people see a pod: "launcher" or "worker-<i>".
func hostName(p *corev1.Pod) string { return HostOf(p).Name() }

// HostPrefix is what logs put before each line of a pod: its host in
// brackets, "[launcher] " or "[worker-3] ".
func HostPrefix(p *corev1.Pod) string { return "[" + hostName(p) + "] " }

// PodOf finds the current pod of a host: the newest one not being deleted,
// else the newest.
func PodOf(pods []corev1.Pod, role string, index int32) *corev1.Pod {
	var newest *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Labels[api.LabelRole] == role && Index(p) == index && prefer(p, newest) {
			newest = p
		}
	}
	return newest
}

// prefer reports whether p stands for its host rather than current: a pod
// not being deleted, the newest first.
func prefer(p, current *corev1.Pod) bool {
	if current == nil {
		return true
	}
	return p.DeletionTimestamp == nil && (current.DeletionTimestamp != nil || current.CreationTimestamp.Before(&p.CreationTimestamp))
}

// HostPods is each host's pod among a job's pods, the one PodOf picks, for
// a caller that looks up every host: one pass over the pods instead of one
// a host.
type HostPods map[hostKey]*corev1.Pod

type hostKey struct {
	role  string
	index int32
}

// IndexHosts indexes a job's pods by host.
func IndexHosts(pods []corev1.Pod) HostPods {
	out := make(HostPods, len(pods))
	for i := range pods {
		p := &pods[i]
		k := hostKey{p.Labels[api.LabelRole], Index(p)}
		if prefer(p, out[k]) {
			out[k] = p
		}
	}
	return out
}

// Of is the pod of one host, or nil.
func (h HostPods) Of(role string, index int32) *corev1.Pod { return h[hostKey{role, index}] }
