// Package v1alpha1 holds Torus's own API, group torus-mpi.io: only what the
// Trainer API has no place for.
// +kubebuilder:object:generate=true
// +groupName=torus-mpi.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API's group and version.
	GroupVersion = schema.GroupVersion{Group: "torus-mpi.io", Version: "v1alpha1"}
	// SchemeBuilder registers the API's types. An API package keeps to
	// apimachinery, so that clients import it without controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MPINetworkProfile{}, &MPINetworkProfileList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
