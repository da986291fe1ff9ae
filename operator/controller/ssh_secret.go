package controller

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// ensureSSHSecret makes sure the job has keys for its current run: it
// creates them when missing and replaces them when the JobSet restarted
// since they were made. It reports whether it wrote.
func (r *TrainJobReconciler) ensureSSHSecret(ctx context.Context, s *scope) (bool, error) {
	restarts := int32(0)
	if s.jobSet != nil {
		restarts = s.jobSet.Status.Restarts
	}
	job := client.ObjectKeyFromObject(s.tj)
	key := client.ObjectKey{Namespace: s.tj.Namespace, Name: mpi.SSHSecretName(s.tj.Name)}
	existing := &corev1.Secret{}
	err := r.client.Get(ctx, key, existing)
	var current *mpi.SSHKeys
	switch {
	case err == nil:
		if err := r.checkMade(childSecret, existing, s.tj); err != nil {
			return false, err
		}
		made, _ := strconv.Atoi(existing.Annotations[api.AnnotationJobSetRestarts])
		restarted := int32(made) < restarts
		if !restarted {
			replace, err := r.keysOfEvictedRun(ctx, s, existing)
			if err != nil || !replace {
				r.memory.created.seen(childSecret, job)
				return false, err
			}
		}
		if r.awaitingCreated(s, childSecret, restarts) {
			// The cache still shows the keys this run's replaced.
			return false, nil
		}
		// The new run's keys are the ones the old Secret holds for it:
		// its pods may have mounted either Secret (mpi.SSHSecretData).
		// Read past the cache, which keeps no Secret's data.
		var old corev1.Secret
		switch err := r.apiReader.Get(ctx, key, &old); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("reading SSH secret: %w", err)
		case old.UID != existing.UID:
			// Replaced since the cache saw it: judge the one there now.
			s.awaitCache = true
			return false, nil
		}
		// Only data Torus made: the stamp of the Secret's name can be
		// copied onto a Secret of chosen keys, its data's cannot. Keys
		// with no stamp of their data are not carried: the run gets
		// fresh ones.
		proof := r.proofs.dataProof(childSecret, &old, s.tj)
		if proof == dataForged {
			return false, &childConflict{kind: childSecret, name: old.Name, tj: s.tj}
		}
		if next, ok := mpi.NextSSHKeys(old.Data); ok && proof == dataMade && restarted {
			// Kept until the new Secret exists: the old one may be gone
			// before the create succeeds (a finalizer, a refused create).
			r.memory.carried.carry(job, carried{uid: s.tj.UID, run: restarts, keys: next})
		}
		// The Secret is immutable: new keys mean a new object.
		if gone, err := r.deleteSSHSecret(ctx, s); err != nil || !gone {
			return false, err
		}
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("getting SSH secret: %w", err)
	case r.awaitingCreated(s, childSecret, restarts):
		return false, nil
	}
	if c := r.memory.carried.carriedFor(job, s.tj.UID, restarts); c != nil {
		current = c.keys
	}
	secret, err := children.BuildSSHSecret(s.tj, s.job, restarts, current, r.keyAlgorithm)
	if err != nil {
		return false, fmt.Errorf("building SSH secret: %w", err)
	}
	if at := reservedAt(s.workload); at != "" {
		secret.Annotations[api.AnnotationQuotaReserved] = at
	}
	r.proofs.stamp(childSecret, secret, s.tj)
	r.proofs.stampData(childSecret, secret, s.tj)
	if err := r.createExpected(ctx, s, childSecret, restarts, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// A stale cache, the Secret replaced still being deleted (a
			// finalizer), or a Secret the cache does not hold (it lacks
			// Torus's label), which must not be used.
			if err := r.checkMadeLive(ctx, childSecret, corev1.SchemeGroupVersion.WithKind("Secret"), key, s.tj); err != nil {
				return false, err
			}
			s.awaitCache = true
			return false, nil
		}
		return false, fmt.Errorf("creating SSH secret: %w", err)
	}
	r.memory.carried.drop(job)
	ctrl.LoggerFrom(ctx).V(2).Info("Created SSH keys", "secret", secret.Name, "jobSetRestarts", restarts)
	if isTrue(s.tj, trainjob.ConditionCreated) {
		// New keys for a resumed or restarted run, or a queued job whose
		// quota Kueue reserved; the first run's of a job outside Kueue are
		// named in the JobSetCreated event.
		s.event(corev1.EventTypeNormal, trainjob.ReasonSSHKeysCreated, "Created SSH keys in Secret %s", secret.Name)
		r.metrics.KeyRotations.WithLabelValues(s.tj.Namespace).Inc()
	}
	return true, nil
}

// keysOfEvictedRun reports whether the job's keys, made for its current
// JobSet run, are those of a run Kueue evicted (keysPredateReservation)
// and no pod uses them: every live pod of the job still waits behind
// Torus's gate, which no pod of the run Kueue started since has left. A
// pod that has left it may have mounted the keys, and new keys would split
// the run between two of them: such a run keeps its keys, and the
// decision is remembered. The pods are read from the API server, past a
// cache that may not show one the pods' webhook has just let through.
func (r *TrainJobReconciler) keysOfEvictedRun(ctx context.Context, s *scope, secret *corev1.Secret) (bool, error) {
	job := client.ObjectKeyFromObject(s.tj)
	if !keysPredateReservation(secret, s.workload) {
		r.memory.keptKeys.forget(job)
		return false, nil
	}
	if kept, ok := r.memory.keptKeys.get(job); ok && kept == secret.UID {
		return false, nil
	}
	var pods corev1.PodList
	if err := r.apiReader.List(ctx, &pods, client.InNamespace(s.tj.Namespace), client.MatchingLabels{api.LabelJobName: s.tj.Name}); err != nil {
		return false, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp.IsZero() && !hasGate(p, api.SchedulingGateSSHKeys) {
			ctrl.LoggerFrom(ctx).V(2).Info("Keeping the keys of an evicted run: a pod of the job has left its gate", "pod", p.Name)
			r.memory.keptKeys.set(job, secret.UID)
			return false, nil
		}
	}
	return true, nil
}

// carried are the keys a restarted run takes, read from the Secret it
// replaces. They live in memory only: an operator that dies between
// deleting the old Secret and creating the new one makes fresh keys, and
// pods of that run that had mounted the old Secret fail to connect (the
// launcher's ssh says why; the JobSet's failure policy decides).
type carried struct {
	uid  types.UID
	run  int32
	keys *mpi.SSHKeys
}

// deleteSSHSecret removes the job's keys, if any, and reports whether they
// are gone. It asks the cache first, so that reconciling a suspended job
// sends no request, and deletes only the Secret the cache shows (a UID
// precondition): a cache that lags must not take newer keys with it. Keys
// created but not cached yet are deleted by name.
func (r *TrainJobReconciler) deleteSSHSecret(ctx context.Context, s *scope) (bool, error) {
	key := client.ObjectKey{Namespace: s.tj.Namespace, Name: mpi.SSHSecretName(s.tj.Name)}
	cached := &corev1.Secret{}
	var pre client.Preconditions
	switch err := r.client.Get(ctx, key, cached); {
	case err == nil && !r.proofs.made(childSecret, cached, s.tj):
		return true, nil // not keys Torus made for this job: never delete another's Secret
	case err == nil:
		pre.UID = ptr.To(cached.UID)
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("getting SSH secret: %w", err)
	case !r.memory.created.pending(childSecret, s.tj, anyRun, s.now):
		return true, nil
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	switch err := r.client.Delete(ctx, secret, pre); {
	case apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		// Other keys than the cache shows: it is behind.
		s.awaitCache = true
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting SSH secret: %w", err)
	default:
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted SSH keys", "secret", secret.Name)
		s.event(corev1.EventTypeNormal, trainjob.ReasonSSHKeysDeleted, "Deleted SSH keys in Secret %s", secret.Name)
	}
	r.memory.created.seen(childSecret, client.ObjectKeyFromObject(s.tj))
	return true, nil
}
