package controller

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/operator/mpi"
)

// networkPolicyRestricted is the value of AnnotationNetworkPolicy that asks
// for a per-job NetworkPolicy.
const networkPolicyRestricted = "restricted"

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// NetworkPolicyName is the name of a job's NetworkPolicy.
func NetworkPolicyName(trainJob string) string { return trainJob + "-mpi" }

// BuildNetworkPolicy admits ingress to a job's pods only from the job's own
// pods, on any port: sshd and MPI's dynamic ports. Egress is not restricted,
// so DNS and the launcher's connections to workers keep working.
func BuildNetworkPolicy(tj *trainer.TrainJob) *networkingv1.NetworkPolicy {
	own := metav1.LabelSelector{MatchLabels: map[string]string{mpi.LabelJobName: tj.Name}}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:            NetworkPolicyName(tj.Name),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{mpi.LabelJobName: tj.Name},
			OwnerReferences: []metav1.OwnerReference{mpi.OwnerReference(tj)},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: own,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &own}}}},
		},
	}
}

// ensureNetworkPolicy creates the job's NetworkPolicy when its runtime or
// namespace opts in; owner references remove it with the job.
func (r *TrainJobReconciler) ensureNetworkPolicy(ctx context.Context, s *scope, rt *mpi.Runtime) error {
	want := rt.Annotations[mpi.AnnotationNetworkPolicy] == networkPolicyRestricted
	if !want {
		var ns corev1.Namespace
		if err := r.client.Get(ctx, client.ObjectKey{Name: s.tj.Namespace}, &ns); err != nil {
			return fmt.Errorf("getting namespace %s: %w", s.tj.Namespace, err)
		}
		want = ns.Annotations[mpi.AnnotationNetworkPolicy] == networkPolicyRestricted
	}
	if !want {
		return nil
	}
	var existing networkingv1.NetworkPolicy
	err := r.client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: NetworkPolicyName(s.tj.Name)}, &existing)
	if err == nil {
		return checkControlled("NetworkPolicy", &existing, s.tj)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting NetworkPolicy: %w", err)
	}
	if err := r.client.Create(ctx, BuildNetworkPolicy(s.tj)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating NetworkPolicy: %w", err)
	}
	return nil
}
