package mpi

import (
	"maps"
	"slices"
	"testing"

	"github.com/torus-mpi/torus/api"
)

func TestCheckAnnotations(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		wantBad     []string
	}{
		"good values": {annotations: map[string]string{
			api.AnnotationSSHPort: "2222", api.AnnotationSchedulingTimeout: "10m", api.AnnotationSSHKeyAlgorithm: "ecdsa-p384",
			api.AnnotationTopology: "cloud.provider.com/topology-rack", api.AnnotationKeepSSHKeys: "true", api.AnnotationNetworkProfile: "ib-sriov",
			api.AnnotationRemoteLaunch: "agent", api.AnnotationLaunchAgentPath: "/usr/local/bin/torus-launch",
			api.AnnotationLaunchAgentDelivery: "image-volume",
		}},
		"the agent's delivery: the other way":          {annotations: map[string]string{api.AnnotationLaunchAgentDelivery: "init-container"}},
		"the agent's delivery: as the nodes allow":     {annotations: map[string]string{api.AnnotationLaunchAgentDelivery: "auto"}},
		"the agent's delivery: not a way Torus knows":  {annotations: map[string]string{api.AnnotationLaunchAgentDelivery: "hostPath"}, wantBad: []string{api.AnnotationLaunchAgentDelivery}},
		"the agent's path: not relative":               {annotations: map[string]string{api.AnnotationLaunchAgentPath: "bin/torus-launch"}, wantBad: []string{api.AnnotationLaunchAgentPath}},
		"the agent's path: another binary's name":      {annotations: map[string]string{api.AnnotationLaunchAgentPath: "/usr/bin/sshd"}, wantBad: []string{api.AnnotationLaunchAgentPath}},
		"the agent's path: not clean":                  {annotations: map[string]string{api.AnnotationLaunchAgentPath: "/usr/../bin/torus-launch"}, wantBad: []string{api.AnnotationLaunchAgentPath}},
		"others' annotations are not Torus's to check": {annotations: map[string]string{"example.com/port": "x"}},
		"a restart budget":                             {annotations: map[string]string{api.AnnotationMaxRestarts: "3"}},
		"no restarts":                                  {annotations: map[string]string{api.AnnotationMaxRestarts: "0"}},
		"a negative budget":                            {annotations: map[string]string{api.AnnotationMaxRestarts: "-1"}, wantBad: []string{api.AnnotationMaxRestarts}},
		"an absurd budget":                             {annotations: map[string]string{api.AnnotationMaxRestarts: "1000000"}, wantBad: []string{api.AnnotationMaxRestarts}},
		"a budget that is not a number":                {annotations: map[string]string{api.AnnotationMaxRestarts: "always"}, wantBad: []string{api.AnnotationMaxRestarts}},
		"a grace period":                               {annotations: map[string]string{api.AnnotationTerminationGracePeriod: "5m"}},
		"a grace period longer than an hour":           {annotations: map[string]string{api.AnnotationTerminationGracePeriod: "2h"}, wantBad: []string{api.AnnotationTerminationGracePeriod}},
		"a grace period of a fraction of a second":     {annotations: map[string]string{api.AnnotationTerminationGracePeriod: "1500ms"}, wantBad: []string{api.AnnotationTerminationGracePeriod}},
		"no grace period":                              {annotations: map[string]string{api.AnnotationTerminationGracePeriod: "0s"}, wantBad: []string{api.AnnotationTerminationGracePeriod}},
		"a stall timeout":                              {annotations: map[string]string{api.AnnotationStallTimeout: "45m"}},
		"a stall timeout of seconds":                   {annotations: map[string]string{api.AnnotationStallTimeout: "30s"}, wantBad: []string{api.AnnotationStallTimeout}},
		"a stall timeout of a month":                   {annotations: map[string]string{api.AnnotationStallTimeout: "720h"}, wantBad: []string{api.AnnotationStallTimeout}},
		"bad values, each named": {
			annotations: map[string]string{
				api.AnnotationSSHPort: "80", api.AnnotationSchedulingTimeout: "0s", api.AnnotationSSHKeyAlgorithm: "dsa",
				api.AnnotationTopology: "a b", api.AnnotationKeepSSHKeys: "yes", api.AnnotationNetworkProfile: "UPPER",
				api.AnnotationRemoteLaunch: "ssh",
			},
			wantBad: []string{api.AnnotationKeepSSHKeys, api.AnnotationNetworkProfile, api.AnnotationRemoteLaunch, api.AnnotationSchedulingTimeout, api.AnnotationSSHKeyAlgorithm, api.AnnotationSSHPort, api.AnnotationTopology},
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
