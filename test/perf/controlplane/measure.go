package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// jobTimes are when the benchmark asked for a TrainJob and when it saw
// each of its objects.
type jobTimes struct {
	created, jobSet, secret, configMap time.Time
}

// done is when the last of its objects appeared.
func (t *jobTimes) done() time.Time {
	d := t.jobSet
	for _, x := range []time.Time{t.secret, t.configMap} {
		if x.After(d) {
			d = x
		}
	}
	return d
}

// tracker watches one namespace's JobSets, Secrets and ConfigMaps (their
// metadata only) and notes when each job's objects first appear. Both
// contenders name the JobSet after the TrainJob and make the Secret and
// ConfigMap controlled by it; the names differ (upstream's Secret is
// <job>-mpi-ssh-auth, Torus's <job>-mpi-ssh).
type tracker struct {
	ns   string
	want int
	// configMaps: the contender makes a hostfile ConfigMap per job
	// (upstream, the floor); Torus carries the hostfile in its Secret.
	configMaps bool

	mu       sync.Mutex
	jobs     map[string]*jobTimes
	complete int
	// reached are closed when complete reaches their count (waitFor).
	reached map[int]chan struct{}
}

func newTracker(ns string, want int, configMaps bool) *tracker {
	return &tracker{ns: ns, want: want, configMaps: configMaps, jobs: map[string]*jobTimes{}, reached: map[int]chan struct{}{}}
}

// hasAll reports whether every object the contender makes for a job
// appeared.
func (t *tracker) hasAll(jt *jobTimes) bool {
	return !jt.jobSet.IsZero() && !jt.secret.IsZero() && (!t.configMaps || !jt.configMap.IsZero())
}

var (
	gvrJobSet    = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	gvrSecret    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrConfigMap = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// start watches until ctx ends; a closed watch is resumed from a fresh
// list, so nothing is missed.
func (t *tracker) start(ctx context.Context, mc metadata.Interface) error {
	for _, gvr := range []schema.GroupVersionResource{gvrJobSet, gvrSecret, gvrConfigMap} {
		ri := mc.Resource(gvr).Namespace(t.ns)
		list, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for i := range list.Items {
			t.saw(gvr, &list.Items[i], time.Now())
		}
		rv := list.ResourceVersion
		go func() {
			for ctx.Err() == nil {
				w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
				if err == nil {
					for ev := range w.ResultChan() {
						now := time.Now()
						if m, ok := ev.Object.(*metav1.PartialObjectMetadata); ok {
							rv = m.ResourceVersion
							if ev.Type == watch.Added || ev.Type == watch.Modified {
								t.saw(gvr, m, now)
							}
						}
					}
					w.Stop()
				}
				if ctx.Err() != nil {
					return
				}
				// Expired or broken: list again.
				if l, err := ri.List(ctx, metav1.ListOptions{}); err == nil {
					for i := range l.Items {
						t.saw(gvr, &l.Items[i], time.Now())
					}
					rv = l.ResourceVersion
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	return nil
}

func (t *tracker) saw(gvr schema.GroupVersionResource, m *metav1.PartialObjectMetadata, at time.Time) {
	var job string
	switch gvr {
	case gvrJobSet:
		job = m.Name
	default:
		for _, o := range m.OwnerReferences {
			if o.Kind == trainer.TrainJobKind && ptr.Deref(o.Controller, false) {
				job = o.Name
			}
		}
		if job == "" {
			for _, suffix := range []string{"-mpi-hostfile", "-mpi-ssh-auth", "-mpi-ssh"} {
				if n, ok := strings.CutSuffix(m.Name, suffix); ok {
					job = n
					break
				}
			}
		}
	}
	if job == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	jt := t.jobs[job]
	if jt == nil {
		jt = &jobTimes{}
		t.jobs[job] = jt
	}
	was := t.hasAll(jt)
	var slot *time.Time
	switch gvr {
	case gvrJobSet:
		slot = &jt.jobSet
	case gvrSecret:
		slot = &jt.secret
	default:
		slot = &jt.configMap
	}
	if slot.IsZero() {
		*slot = at
	}
	if !was && t.hasAll(jt) {
		t.complete++
		if ch, ok := t.reached[t.complete]; ok {
			close(ch)
			delete(t.reached, t.complete)
		}
	}
}

func (t *tracker) created(job string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	jt := t.jobs[job]
	if jt == nil {
		jt = &jobTimes{}
		t.jobs[job] = jt
	}
	jt.created = at
}

// wait blocks until every job is complete or timeout passes.
func (t *tracker) wait(ctx context.Context, timeout time.Duration) error {
	return t.waitFor(ctx, t.want, timeout)
}

// waitFor blocks until count jobs are complete or timeout passes.
func (t *tracker) waitFor(ctx context.Context, count int, timeout time.Duration) error {
	t.mu.Lock()
	if t.complete >= count {
		t.mu.Unlock()
		return nil
	}
	ch, ok := t.reached[count]
	if !ok {
		ch = make(chan struct{})
		t.reached[count] = ch
	}
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-time.After(timeout):
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Errorf("%d of %d jobs complete after %s", t.complete, count, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lastOf is when the last object of the named jobs appeared.
func (t *tracker) lastOf(names []string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, n := range names {
		if jt := t.jobs[n]; jt != nil && jt.done().After(last) {
			last = jt.done()
		}
	}
	return last
}

// latencies are the per-job times from the create request to the last of
// its objects, sorted, and the batch's end.
func (t *tracker) latencies() (lat []time.Duration, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, jt := range t.jobs {
		if !t.hasAll(jt) || jt.created.IsZero() {
			continue
		}
		d := jt.done()
		lat = append(lat, d.Sub(jt.created))
		if d.After(last) {
			last = d
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, last
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// newTrainJob is an MPI TrainJob on the OpenMPI runtime.
func newTrainJob(ns, name string, workers int32) *trainer.TrainJob {
	return &trainer.TrainJob{
		// The label Torus's admission webhook (not run here) defaults onto
		// MPI jobs, which kubectl mpi list selects by.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{api.LabelImplementation: string(mpi.OpenMPI)}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{
				Name:     runtimeName,
				APIGroup: ptr.To(trainer.GroupVersion.Group),
				Kind:     ptr.To(trainer.ClusterTrainingRuntimeKind),
			},
			Trainer: &trainer.Trainer{NumNodes: ptr.To(workers)},
		},
	}
}

// creator submits jobs from a fixed number of goroutines, as fast as the
// API server takes them. For the floor it also creates each job's JobSet
// and Secret itself, exactly as Torus renders them, and for the
// three-object floor the hostfile ConfigMap.
type creator struct {
	// c creates the TrainJobs, directly: a contender's requests alone go
	// through the counting proxy.
	c           client.Client
	concurrency int
	// floor, when set, is the runtime the floor renders objects from, and
	// children the client that creates them, through the proxy.
	floor    *mpi.Runtime
	children client.Client
	// hostfileConfigMap: the floor creates the hostfile ConfigMap too.
	hostfileConfigMap bool
	// behind, when above 0, is how many workers create the floor's
	// objects from a queue of created TrainJobs (contender.Behind).
	behind int
}

func (cr *creator) run(ctx context.Context, t *tracker, names []string, workers int32) (time.Time, error) {
	start := time.Now()
	work := make(chan string)
	errs := make(chan error, 2*len(names))
	var wg, behind sync.WaitGroup
	var queue chan *trainer.TrainJob
	if cr.floor != nil && cr.behind > 0 {
		queue = make(chan *trainer.TrainJob, len(names))
		for range cr.behind {
			behind.Add(1)
			go func() {
				defer behind.Done()
				for tj := range queue {
					if err := cr.makeObjects(ctx, tj); err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	for range cr.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if err := cr.oneTo(ctx, t, name, workers, queue); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	if queue != nil {
		close(queue)
		behind.Wait()
	}
	close(errs)
	if err, ok := <-errs; ok {
		return start, err
	}
	return start, nil
}

func (cr *creator) one(ctx context.Context, t *tracker, name string, workers int32) error {
	return cr.oneTo(ctx, t, name, workers, nil)
}

// oneTo creates a TrainJob and, for the floor, its objects, or hands it
// to queue for the workers behind to make them.
func (cr *creator) oneTo(ctx context.Context, t *tracker, name string, workers int32, queue chan<- *trainer.TrainJob) error {
	tj := newTrainJob(t.ns, name, workers)
	t.created(name, time.Now())
	if err := cr.c.Create(ctx, tj); err != nil {
		return fmt.Errorf("creating TrainJob %s: %w", name, err)
	}
	switch {
	case cr.floor == nil:
		return nil
	case queue != nil:
		queue <- tj
		return nil
	}
	return cr.makeObjects(ctx, tj)
}

// makeObjects creates the floor's objects of a created TrainJob.
func (cr *creator) makeObjects(ctx context.Context, tj *trainer.TrainJob) error {
	name := tj.Name
	job, err := mpi.ResolveJob(tj, cr.floor)
	if err != nil {
		return err
	}
	js, err := children.BuildJobSet(tj, cr.floor, job, children.BuildOptions{ClusterDomain: mpi.DefaultClusterDomain, LaunchImage: benchLaunchImage})
	if err != nil {
		return err
	}
	secret, err := children.BuildSSHSecret(tj, job, 0, nil, mpi.DefaultKeyAlgorithm)
	if err != nil {
		return err
	}
	objs := []client.Object{secret, js}
	if cr.hostfileConfigMap {
		objs = append([]client.Object{floorHostfile(tj, job)}, objs...)
	}
	for _, o := range objs {
		if err := cr.children.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T for %s: %w", o, name, err)
		}
	}
	return nil
}

// floorHostfile is the hostfile ConfigMap of the three-object floor, as
// Torus made it before it carried the hostfile in the job's Secret: the
// floor stays what mpi-operator and upstream Trainer create per job.
func floorHostfile(tj *trainer.TrainJob, job *mpi.Job) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            tj.Name + "-mpi-hostfile",
			Namespace:       tj.Namespace,
			Labels:          map[string]string{api.LabelJobName: tj.Name},
			OwnerReferences: []metav1.OwnerReference{children.OwnerReference(tj)},
		},
		Data: map[string]string{mpi.HostfileKey: job.Hostfile()},
	}
}
