package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// reprove stamps again, under the current key, the job's children that
// were stamped under an earlier one, so that a rotated or lost proof key
// strands no job: its children are still used, its end still seen and its
// keys still deleted.
//
//   - A child stamped under a retired key is stamped again, its data's
//     stamp too when that verifies.
//   - A stamped child that no key verifies, older than the current key, was
//     stamped under a key since lost (the operator's namespace deleted and
//     installed again, the key's Secret deleted). While that key was held,
//     any object in the way of a child made the job report ChildConflict,
//     so a job that reports none has only children Torus made: they are
//     stamped again. A job that reports a conflict keeps it. The stamp of
//     such a Secret's data is dropped, not renewed, so a restarted run gets
//     fresh keys rather than keys Torus can no longer vouch for.
//
// It reports whether it wrote: the cache then shows the old stamps until
// the patches' events come, and the reconcile waits for them.
func (r *TrainJobReconciler) reprove(ctx context.Context, s *scope) (bool, error) {
	var found []client.Object
	if s.jobSet != nil {
		found = append(found, s.jobSet)
	}
	secret := &corev1.Secret{}
	policy := &networkingv1.NetworkPolicy{}
	for _, c := range []struct {
		name string
		obj  client.Object
	}{{mpi.SSHSecretName(s.tj.Name), secret}, {children.NetworkPolicyName(s.tj.Name), policy}} {
		switch err := r.client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: c.name}, c.obj); {
		case err == nil:
			found = append(found, c.obj)
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("getting %s: %w", c.name, err)
		}
	}
	created := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionCreated)
	conflicted := created != nil && created.Reason == trainjob.ReasonChildConflict
	wrote := false
	for _, obj := range found {
		kind := childKind(obj)
		lost := false
		switch r.proofs.judge(kind, obj, s.tj) {
		case provenRetired:
		case stampedBefore:
			if conflicted {
				continue
			}
			lost = true
		default:
			continue
		}
		if err := r.restamp(ctx, s, kind, obj, lost); err != nil {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
}

func childKind(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return childSecret
	case *networkingv1.NetworkPolicy:
		return childNetworkPolicy
	}
	return childJobSet
}

// restamp writes obj's stamp under the current key, on the object as read
// (a resourceVersion precondition: an object replaced since is judged
// again). A Secret's data stamp is renewed when it verifies under a known
// key, dropped when lost is set or it does not.
func (r *TrainJobReconciler) restamp(ctx context.Context, s *scope, kind string, obj client.Object, lost bool) error {
	stamps := map[string]any{api.AnnotationProof: r.proofs.sign(kind, obj, s.tj, obj.GetAnnotations()[api.AnnotationJobSetRestarts])}
	if kind == childSecret {
		// The cache keeps no Secret's data.
		var whole corev1.Secret
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), &whole); err != nil {
			return fmt.Errorf("reading %s %s: %w", kind, obj.GetName(), client.IgnoreNotFound(err))
		}
		if whole.UID != obj.GetUID() {
			s.awaitCache = true
			return nil
		}
		stamps[api.AnnotationProofData] = nil
		if !lost && r.proofs.dataProof(kind, &whole, s.tj) == dataMade {
			stamps[api.AnnotationProofData] = r.proofs.sign(kind, &whole, s.tj, whole.Annotations[api.AnnotationJobSetRestarts], dataDigest(whole.Data))
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": obj.GetResourceVersion(), "annotations": stamps}})
	if err != nil {
		return fmt.Errorf("encoding the patch that stamps %s %s: %w", kind, obj.GetName(), err)
	}
	if err := r.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			s.awaitCache = true
			return nil
		}
		return fmt.Errorf("stamping %s %s under the current proof key: %w", kind, obj.GetName(), err)
	}
	how := "a retired key"
	if lost {
		how = "a key the operator no longer holds"
	}
	ctrl.LoggerFrom(ctx).Info("Stamped a child again under the current proof key", "kind", kind, "name", obj.GetName(), "stampedUnder", how)
	return nil
}
