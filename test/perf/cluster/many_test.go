package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The burst's output names the Kueue settings it ran under, read from the
// local cluster's own configuration file beside its kubeconfig.
func TestKueueSettings(t *testing.T) {
	for _, tc := range []struct {
		name, config, want string
	}{
		{
			name: "the manifests' Workloads and a raised JobSet",
			config: `controller:
  groupKindConcurrency:
    JobSet.jobset.x-k8s.io: 5
    Workload.kueue.x-k8s.io: 10
waitForPodsReady:
  timeout: 1h0m0s
`,
			want: "Kueue reconciles JobSets 5 and Workloads 10 at a time (`controller.groupKindConcurrency`); its PodsReady timeout is 1h0m0s.",
		},
		{
			name:   "controller-runtime's default",
			config: "integrations:\n  frameworks: [jobset.x-k8s.io/jobset]\n",
			want:   "Kueue reconciles JobSets 1 and Workloads 1 at a time (`controller.groupKindConcurrency`); its PodsReady timeout is none.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "config", "kueue.yaml"), []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := kueueSettings(filepath.Join(dir, "kubeconfig")); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// A burst sends again the creations the API server may accept later, and
// no other.
func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a webhook the API server could not call", apierrors.NewInternalError(errors.New(`failed calling webhook "mjobset.kb.io": context deadline exceeded`)), true},
		{"the server's timeout", apierrors.NewServerTimeout(gr, "create", 1), true},
		{"a request timeout", apierrors.NewTimeoutError("request did not complete", 1), true},
		{"a throttle", apierrors.NewTooManyRequests("slow down", 1), true},
		{"an invalid object", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "JobSet"}, "floor-m0001", nil), false},
		{"a name taken", apierrors.NewAlreadyExists(gr, "floor-m0001"), false},
		{"a refusal", apierrors.NewForbidden(gr, "floor-m0001", errors.New("no")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Errorf("transient(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}
