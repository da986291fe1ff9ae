package mpi

import (
	"maps"
	"slices"
	"testing"
)

func TestCheckAnnotations(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		wantBad     []string
	}{
		"good values": {annotations: map[string]string{
			AnnotationSSHPort: "2222", AnnotationSchedulingTimeout: "10m", AnnotationSSHKeyAlgorithm: "ecdsa-p384",
			AnnotationTopology: "cloud.provider.com/topology-rack", AnnotationKeepSSHKeys: "true", AnnotationNetworkProfile: "ib-sriov",
		}},
		"others' annotations are not Torus's to check": {annotations: map[string]string{"example.com/port": "x"}},
		"bad values, each named": {
			annotations: map[string]string{
				AnnotationSSHPort: "80", AnnotationSchedulingTimeout: "0s", AnnotationSSHKeyAlgorithm: "dsa",
				AnnotationTopology: "a b", AnnotationKeepSSHKeys: "yes", AnnotationNetworkProfile: "UPPER",
			},
			wantBad: []string{AnnotationKeepSSHKeys, AnnotationNetworkProfile, AnnotationSchedulingTimeout, AnnotationSSHKeyAlgorithm, AnnotationSSHPort, AnnotationTopology},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(CheckAnnotations(tc.annotations)))
			if !slices.Equal(got, tc.wantBad) {
				t.Errorf("CheckAnnotations flagged %v, want %v", got, tc.wantBad)
			}
		})
	}
}
