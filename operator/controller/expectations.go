package controller

import (
	"context"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
)

// createExpected creates a child of the job, expected before the request
// (a reconcile that comes before its watch event then waits for it rather
// than creating it again) and no longer when the request fails: nothing
// was created to wait for.
func (r *TrainJobReconciler) createExpected(ctx context.Context, s *scope, kind string, run int32, obj client.Object) error {
	r.memory.created.expect(kind, s.tj, run, s.now)
	if err := r.client.Create(ctx, obj); err != nil {
		r.memory.created.seen(kind, client.ObjectKeyFromObject(s.tj))
		return err
	}
	return nil
}

// awaitingCreated reports whether a child an earlier reconcile created (for
// this run) has yet to reach the cache, and if so makes this reconcile wait
// for its watch event rather than act on the stale cache.
func (r *TrainJobReconciler) awaitingCreated(s *scope, kind string, run int32) bool {
	if !r.memory.created.pending(kind, s.tj, run, s.now) {
		return false
	}
	s.awaitCache = true
	return true
}

// expectedCreate drops the create events of children the reconciler made
// and was waiting for: the reconcile that created one already did what its
// appearance would call for, and a reconcile that finds nothing to do
// still reads every child and pod of the job. Other create events pass:
// children listed again after a watch gap or an operator restart, children
// made by someone else, and a JobSet that already carries its controller's
// report.
func (r *TrainJobReconciler) expectedCreate(kind string) predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool {
		run := int32(0)
		if kind == childSecret {
			made, _ := strconv.Atoi(e.Object.GetAnnotations()[api.AnnotationJobSetRestarts])
			run = int32(made)
		}
		if !r.memory.created.observed(kind, e.Object, run) {
			return true
		}
		js, ok := e.Object.(*jobsetv1alpha2.JobSet)
		return ok && jobSetObserved(js)
	}}
}
