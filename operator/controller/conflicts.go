package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/trainjob"
)

// conflictRecheck is how soon a job whose child name is taken looks again
// at first: the object in the way may be one the cache does not hold (it
// lacks Torus's label), so no event says when it goes. The wait doubles
// with each look up to maxConflictRecheck (conflictBackoff).
const (
	conflictRecheck    = 10 * time.Second
	maxConflictRecheck = 5 * time.Minute
)

// childConflict says a child's name is taken by an object Torus did not
// make for the TrainJob (proofs). Torus never uses such an object: a Secret
// or hostfile made in advance by someone else would choose the job's keys
// or hosts.
type childConflict struct {
	kind, name string
	tj         *trainer.TrainJob
}

func (c *childConflict) Error() string {
	return fmt.Sprintf("%s %s exists and Torus did not make it for TrainJob %s (UID %s), so Torus will not use it: delete it, or give the TrainJob another name",
		c.kind, c.name, c.tj.Name, c.tj.UID)
}

// checkMade returns a childConflict unless Torus made obj for the TrainJob.
func (r *TrainJobReconciler) checkMade(kind string, obj metav1.Object, tj *trainer.TrainJob) error {
	if r.proofs.made(kind, obj, tj) {
		return nil
	}
	return &childConflict{kind: kind, name: obj.GetName(), tj: tj}
}

// checkMadeLive reads an object's metadata from the API server, past the
// cache (which holds only objects with Torus's label), after a create found
// its name taken. It returns a childConflict unless Torus made the object
// for the TrainJob; when it did, the cache is only behind.
func (r *TrainJobReconciler) checkMadeLive(ctx context.Context, kind string, gvk schema.GroupVersionKind, key client.ObjectKey, tj *trainer.TrainJob) error {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := r.apiReader.Get(ctx, key, m); err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, key.Name, client.IgnoreNotFound(err))
	}
	return r.checkMade(kind, m, tj)
}

// handleConflict reports a childConflict on the job (Created=False) and
// reports whether err was one.
func (s *scope) handleConflict(err error) bool {
	var c *childConflict
	if !errors.As(err, &c) {
		return false
	}
	if s.setCondition(trainjob.ConditionCreated, metav1.ConditionFalse, trainjob.ReasonChildConflict, c.Error()) {
		s.event(corev1.EventTypeWarning, trainjob.ReasonChildConflict, "%s", c.Error())
	}
	return true
}
