package mpi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
)

func TestProfileRefusal(t *testing.T) {
	profile := func(sel *metav1.LabelSelector) *torusv1alpha1.MPINetworkProfile {
		return &torusv1alpha1.MPINetworkProfile{ObjectMeta: metav1.ObjectMeta{Name: "ib"}, Spec: torusv1alpha1.MPINetworkProfileSpec{NamespaceSelector: sel}}
	}
	ns := func(labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: labels}}
	}
	hpc := &metav1.LabelSelector{MatchLabels: map[string]string{"torus-mpi.io/rdma": "granted"}}
	cases := map[string]struct {
		profile     *torusv1alpha1.MPINetworkProfile
		ns          *corev1.Namespace
		wantRefusal bool
	}{
		"no selector: every namespace":       {profile: profile(nil), ns: ns(nil)},
		"an empty selector: every namespace": {profile: profile(&metav1.LabelSelector{}), ns: ns(nil)},
		"a namespace that matches":           {profile: profile(hpc), ns: ns(map[string]string{"torus-mpi.io/rdma": "granted"})},
		"a namespace that does not":          {profile: profile(hpc), ns: ns(map[string]string{"team": "a"}), wantRefusal: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ProfileRefusal(tc.profile, tc.ns)
			if err != nil {
				t.Fatal(err)
			}
			if (got != "") != tc.wantRefusal {
				t.Fatalf("refusal = %q, want one: %v", got, tc.wantRefusal)
			}
			if got != "" && !(strings.Contains(got, `MPINetworkProfile "ib"`) && strings.Contains(got, `namespace "team-a"`) && strings.Contains(got, "ask your cluster administrator")) {
				t.Errorf("the refusal does not name the profile, the namespace and how to ask: %q", got)
			}
		})
	}
}

func TestProfileName(t *testing.T) {
	job := map[string]string{api.AnnotationNetworkProfile: "job-net"}
	runtime := map[string]string{api.AnnotationNetworkProfile: "rt-net"}
	for _, tc := range []struct {
		job, runtime map[string]string
		want         string
	}{{job, runtime, "job-net"}, {nil, runtime, "rt-net"}, {nil, nil, ""}} {
		if got := ProfileName(tc.job, tc.runtime); got != tc.want {
			t.Errorf("ProfileName(%v, %v) = %q, want %q", tc.job, tc.runtime, got, tc.want)
		}
	}
}
