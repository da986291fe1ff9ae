package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// rejected tells a request the API server (or a webhook) refused for its
// content from one that may succeed later.
func rejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// specHash fingerprints what Torus decides about a JobSet, leaving out
// suspend, which is synced on its own, and the stamp, which changes with
// the proof key alone (reprove).
func specHash(js *jobsetv1alpha2.JobSet) (string, error) {
	spec := js.Spec.DeepCopy()
	spec.Suspend = nil
	annotations := maps.Clone(js.Annotations)
	delete(annotations, api.AnnotationProof)
	data, err := json.Marshal(struct {
		Labels      map[string]string
		Annotations map[string]string
		Spec        *jobsetv1alpha2.JobSetSpec
	}{js.Labels, annotations, spec})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12]), nil
}

// ensureJobSet creates the JobSet, or brings an existing one to the desired
// state as far as JobSet allows: pod templates change only while suspended,
// and suspend follows the TrainJob. It writes nothing when nothing differs.
//
// When Kueue admits the JobSet (queued), Kueue owns its suspend field:
// Torus may suspend it for the user but never resumes it.
func (r *TrainJobReconciler) ensureJobSet(ctx context.Context, s *scope, desired *jobsetv1alpha2.JobSet, queued bool) error {
	log := ctrl.LoggerFrom(ctx)
	existing := s.jobSet
	wantSuspend := ptr.Deref(desired.Spec.Suspend, false)
	if existing != nil {
		wantSuspend = !s.willRun(desired, queued)
		desired.Spec.Suspend = ptr.To(wantSuspend)
	}
	hold := s.restartHoldOutsideKueue(queued)
	if hold > 0 {
		s.lookAgain(hold)
	}
	if ptr.Deref(s.tj.Spec.Suspend, false) || hold > 0 {
		if desired.Annotations == nil {
			desired.Annotations = map[string]string{}
		}
		desired.Annotations[api.AnnotationSuspendedByTorus] = "true"
	}
	r.proofs.stamp(childJobSet, desired, s.tj)
	hash, err := specHash(desired)
	if err != nil {
		return fmt.Errorf("hashing JobSet: %w", err)
	}
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[api.AnnotationSpecHash] = hash

	if existing == nil {
		if r.awaitingCreated(s, childJobSet, 0) {
			return nil
		}
		if err := r.createExpected(ctx, s, childJobSet, 0, desired); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// A stale cache: its watch event comes.
				return nil
			}
			if rejected(err) {
				// Retrying cannot help; a runtime change brings the job back.
				s.setCondition(trainjob.ConditionCreated, metav1.ConditionFalse, trainjob.ReasonJobSetRejected,
					"The API server rejected the JobSet built from the runtime; fix the runtime: "+err.Error())
				return nil
			}
			return fmt.Errorf("creating JobSet: %w", err)
		}
		s.jobSet = desired
		s.created = true
		log.V(2).Info("Created JobSet", "jobSet", desired.Name)
		return nil
	}
	if err := r.checkMade(childJobSet, existing, s.tj); err != nil {
		return err
	}

	isSuspended := ptr.Deref(existing.Spec.Suspend, false)
	sameSpec := existing.Annotations[api.AnnotationSpecHash] == hash
	switch {
	case sameSpec && wantSuspend == isSuspended:
		return nil
	case !sameSpec && (isSuspended || wantSuspend):
		// Templates may change while suspended, and in the same request
		// that suspends or resumes. The update starts from the JobSet as
		// the API server has it: the cache keeps a bounded part.
		updated := &jobsetv1alpha2.JobSet{}
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(existing), updated); err != nil {
			return fmt.Errorf("reading JobSet to update it: %w", err)
		}
		// What was decided on the cached JobSet applies to that version.
		updated.ResourceVersion = existing.ResourceVersion
		updated.Labels = desired.Labels
		updated.Annotations = desired.Annotations
		updated.Spec = desired.Spec
		if err := r.client.Update(ctx, updated); err != nil {
			return fmt.Errorf("updating JobSet: %w", err)
		}
		s.jobSet = updated
		log.V(2).Info("Updated JobSet", "jobSet", updated.Name, "suspend", wantSuspend)
	case wantSuspend != isSuspended:
		patch := client.MergeFrom(existing.DeepCopy())
		updated := existing.DeepCopy()
		updated.Spec.Suspend = ptr.To(wantSuspend)
		if err := r.client.Patch(ctx, updated, patch); err != nil {
			return fmt.Errorf("setting JobSet suspend=%t: %w", wantSuspend, err)
		}
		s.jobSet = updated
		log.V(2).Info("Synced JobSet suspend", "jobSet", updated.Name, "suspend", wantSuspend)
	default:
		// A running JobSet's templates are immutable; the change applies
		// when the job is next suspended or restarted.
		log.V(3).Info("JobSet differs from the TrainJob but is running; leaving it", "jobSet", existing.Name)
	}
	return nil
}
