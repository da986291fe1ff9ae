package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"
)

// Kueue's configuration reads strictly as Kueue's own type, with the
// integrations each mode asks for.
func TestKueueConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mpiJob bool
		want   []string
	}{
		{name: "JobSet only", want: []string{"jobset.x-k8s.io/jobset"}},
		{name: "with MPIJobs", mpiJob: true, want: []string{"jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			concurrency, err := kueueConcurrency()
			if err != nil {
				t.Fatal(err)
			}
			var cfg kueueconfig.Configuration
			if err := yaml.UnmarshalStrict([]byte(kueueConfig(9443, 8443, 8081, "/certs", tc.mpiJob, 45*time.Minute, concurrency)), &cfg); err != nil {
				t.Fatalf("Kueue's configuration does not read as its type: %v", err)
			}
			if cfg.Integrations == nil {
				t.Fatal("no integrations")
			}
			if diff := cmp.Diff(tc.want, cfg.Integrations.Frameworks); diff != "" {
				t.Errorf("frameworks (-want +got):\n%s", diff)
			}
			if p := cfg.WaitForPodsReady; p == nil || p.Timeout.Duration != 45*time.Minute {
				t.Errorf("waitForPodsReady: %+v, want a timeout of 45m", p)
			}
			// As Kueue's manifests install it: Workloads ten at a time.
			if cfg.Controller == nil || cfg.Controller.GroupKindConcurrency["Workload.kueue.x-k8s.io"] != 10 {
				t.Errorf("controller: %+v, want Kueue's own concurrency, such as 10 Workloads at once", cfg.Controller)
			}
			if cfg.Webhook.Port == nil || *cfg.Webhook.Port != 9443 || cfg.Webhook.CertDir != "/certs" {
				t.Errorf("webhook: port %v, certDir %q; want 9443, /certs", cfg.Webhook.Port, cfg.Webhook.CertDir)
			}
		})
	}
}

// -kueue-concurrency reads KIND=N pairs, the last of a kind winning, and
// refuses what Kueue could not take.
func TestConcurrencyFlag(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
		bad    bool
	}{
		{values: []string{"JobSet.jobset.x-k8s.io=5"}, want: "JobSet.jobset.x-k8s.io=5"},
		{values: []string{"Pod=2, JobSet.jobset.x-k8s.io=5", "Pod=3"}, want: "JobSet.jobset.x-k8s.io=5,Pod=3"},
		{values: []string{"=5"}, bad: true},
		{values: []string{"Pod=-1"}, bad: true},
		{values: []string{"Pod=many"}, bad: true},
		{values: []string{"Pod"}, bad: true},
	} {
		var f concurrencyFlag
		var err error
		for _, v := range tc.values {
			if err = f.Set(v); err != nil {
				break
			}
		}
		switch {
		case tc.bad && err == nil:
			t.Errorf("%q: read as %s, want an error", tc.values, f.String())
		case !tc.bad && err != nil:
			t.Errorf("%q: %v", tc.values, err)
		case !tc.bad && f.String() != tc.want:
			t.Errorf("%q: %s, want %s", tc.values, f.String(), tc.want)
		}
	}
}
