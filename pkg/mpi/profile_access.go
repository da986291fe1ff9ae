package mpi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/torus-mpi/torus/api"
	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
)

// ProfileRefusal says why a profile may not serve jobs of a namespace, or
// returns "" when it may: its namespaceSelector does not match the
// namespace's labels. The webhook refuses such jobs; the operator, should
// one get past it, does not start them.
func ProfileRefusal(p *torusv1alpha1.MPINetworkProfile, ns *corev1.Namespace) (string, error) {
	if p.Spec.NamespaceSelector == nil {
		return "", nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	if err != nil {
		return "", fmt.Errorf("MPINetworkProfile %s has an invalid namespaceSelector: %w", p.Name, err)
	}
	if sel.Matches(labels.Set(ns.Labels)) {
		return "", nil
	}
	return fmt.Sprintf("MPINetworkProfile %q is reserved for namespaces matching %q, and namespace %q is not one of them: ask your cluster administrator to grant it the profile (label the namespace, or widen the profile's spec.namespaceSelector), or select another profile (kubectl get mpinetworkprofiles)",
		p.Name, sel.String(), ns.Name), nil
}

// ProfileName is the MPINetworkProfile a job selects, by its own
// annotation or else its runtime's; "" when none.
func ProfileName(jobAnnotations, runtimeAnnotations map[string]string) string {
	if name := jobAnnotations[api.AnnotationNetworkProfile]; name != "" {
		return name
	}
	return runtimeAnnotations[api.AnnotationNetworkProfile]
}
