package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// ensureNetworkPolicy creates the job's NetworkPolicy when its runtime or
// namespace opts in; owner references remove it with the job.
func (r *TrainJobReconciler) ensureNetworkPolicy(ctx context.Context, s *scope, rt *mpi.Runtime) error {
	want := rt.Annotations[api.AnnotationNetworkPolicy] == api.NetworkPolicyRestricted
	if !want {
		var ns corev1.Namespace
		if err := r.client.Get(ctx, client.ObjectKey{Name: s.tj.Namespace}, &ns); err != nil {
			return fmt.Errorf("getting namespace %s: %w", s.tj.Namespace, err)
		}
		want = ns.Annotations[api.AnnotationNetworkPolicy] == api.NetworkPolicyRestricted
	}
	if !want {
		return nil
	}
	var existing networkingv1.NetworkPolicy
	err := r.client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: children.NetworkPolicyName(s.tj.Name)}, &existing)
	if err == nil {
		return r.checkMade(childNetworkPolicy, &existing, s.tj)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting NetworkPolicy: %w", err)
	}
	policy := children.BuildNetworkPolicy(s.tj)
	r.proofs.stamp(childNetworkPolicy, policy, s.tj)
	if err := r.client.Create(ctx, policy); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating NetworkPolicy: %w", err)
	}
	return nil
}
