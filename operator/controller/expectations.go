package controller

import (
	"context"
	"strconv"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
)

// expectations remembers the children a reconcile created until their watch
// events arrive, as the Job and ReplicaSet controllers do with their
// expectations. Another event (the job's own, a pod's) often brings the job
// back before the cache holds its new children: without this, the reconcile
// would create them again and be refused (hack/bench counted 409s for 0-2%
// of jobs), or replace SSH keys it had just made. And the create events of
// children it expects need no reconcile (expectedCreate).
type expectations struct {
	mu sync.Mutex
	// made maps a child, by its kind and its TrainJob (a job has one child
	// of each kind), to when and for what it was created.
	made map[child]expectation
}

type child struct {
	kind string
	job  client.ObjectKey
}

type expectation struct {
	at time.Time
	// uid is the TrainJob's: a job deleted and made again under the same
	// name expects nothing of its namesake.
	uid types.UID
	// run is the JobSet restart count SSH keys were made for; zero for
	// the other kinds.
	run int32
}

// The kinds of children tracked.
const (
	childJobSet = "JobSet"
	childSecret = "Secret"
)

// anyRun matches SSH keys made for any run.
const anyRun = -1

// expectationTTL bounds the wait for a watch event: past it, the cache is
// trusted again (the child may have been deleted before it was seen).
const expectationTTL = time.Minute

func (c *expectations) expect(kind string, tj *trainer.TrainJob, run int32, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made == nil {
		c.made = map[child]expectation{}
	}
	c.made[child{kind, client.ObjectKeyFromObject(tj)}] = expectation{at: now, uid: tj.UID, run: run}
}

// pending reports whether a child was created recently for this job (and,
// for keys, this run, or anyRun) and its watch event has not come yet.
// Callers then wait for it, and requeue after expectationTTL in case the child
// went before it was seen.
func (c *expectations) pending(kind string, tj *trainer.TrainJob, run int32, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := child{kind, client.ObjectKeyFromObject(tj)}
	made, ok := c.made[key]
	if ok && (now.Sub(made.at) > expectationTTL || made.uid != tj.UID) {
		delete(c.made, key)
		return false
	}
	return ok && (run == anyRun || made.run == run)
}

// seen forgets a child once the cache holds it, or once it is deleted.
func (c *expectations) seen(kind string, job client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.made, child{kind, job})
}

// forget drops what is remembered of a job that is gone.
func (c *expectations) forget(job client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, kind := range []string{childJobSet, childSecret} {
		delete(c.made, child{kind, job})
	}
}

// observed reports whether a child that appeared in the cache is the one
// its TrainJob's reconcile created and waits for, and forgets it then.
func (c *expectations) observed(kind string, obj client.Object, run int32) bool {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.Kind != trainer.TrainJobKind {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := child{kind, client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}}
	made, ok := c.made[key]
	if !ok || made.uid != owner.UID || made.run != run {
		return false
	}
	delete(c.made, key)
	return true
}

// createExpected creates a child of the job, expected before the request
// (a reconcile that comes before its watch event then waits for it rather
// than creating it again) and no longer when the request fails: nothing
// was created to wait for.
func (r *TrainJobReconciler) createExpected(ctx context.Context, s *scope, kind string, run int32, obj client.Object) error {
	r.expectations.expect(kind, s.tj, run, s.now)
	if err := r.client.Create(ctx, obj); err != nil {
		r.expectations.seen(kind, client.ObjectKeyFromObject(s.tj))
		return err
	}
	return nil
}

// awaitingCreated reports whether a child an earlier reconcile created (for
// this run) has yet to reach the cache, and if so makes this reconcile wait
// for its watch event rather than act on the stale cache.
func (r *TrainJobReconciler) awaitingCreated(s *scope, kind string, run int32) bool {
	if !r.expectations.pending(kind, s.tj, run, s.now) {
		return false
	}
	s.awaitCache = true
	return true
}

// expectedCreate drops the create events of children the reconciler made
// and was waiting for: the reconcile that created one already did what its
// appearance would call for (hack/bench: about four reconciles per job,
// three of them finding nothing to do). Other create events pass: children
// listed again after a watch gap or an operator restart, children made by
// someone else, and a JobSet that already carries its controller's report.
func (r *TrainJobReconciler) expectedCreate(kind string) predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool {
		run := int32(0)
		if kind == childSecret {
			made, _ := strconv.Atoi(e.Object.GetAnnotations()[api.AnnotationJobSetRestarts])
			run = int32(made)
		}
		if !r.expectations.observed(kind, e.Object, run) {
			return true
		}
		js, ok := e.Object.(*jobsetv1alpha2.JobSet)
		return ok && jobSetObserved(js)
	}}
}
