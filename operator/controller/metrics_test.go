package controller

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// A start-up attempt that failed after registering its metrics leaves them
// in the process's registry; the next attempt's take their place, and are
// the ones served.
func TestRegisterReplacesAFailedAttempts(t *testing.T) {
	failed := NewMetrics()
	if err := failed.Register(); err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	if err := register(newJobsCollector(nil)); err != nil {
		t.Fatalf("first attempt's job counts: %v", err)
	}
	next := NewMetrics()
	if err := next.Register(); err != nil {
		t.Fatalf("next attempt: %v", err)
	}
	jobs := newJobsCollector(nil)
	if err := register(jobs); err != nil {
		t.Fatalf("next attempt's job counts: %v", err)
	}
	// Counted here from no cache: out of the registry before it is read.
	metrics.Registry.Unregister(jobs)
	failed.Created.WithLabelValues("ns").Add(5)
	next.Created.WithLabelValues("ns").Inc()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "torus_trainjobs_created_total" {
			found = true
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v != 1 {
				t.Errorf("registry serves %v, want the next attempt's 1, not the failed one's 5", v)
			}
		}
	}
	if !found {
		t.Error("torus_trainjobs_created_total is not in the registry")
	}
}
