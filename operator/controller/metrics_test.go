package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainjob"
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

// listed is a reader that lists a fixed set of TrainJobs, as the cache
// would hold them.
type listed []trainer.TrainJob

func (l listed) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return nil
}

func (l listed) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*trainer.TrainJobList).Items = l
	return nil
}

// A running job's reported progress, time left (counted down since the
// report) and the report's time are served per job; a job that reports
// nothing, or no longer runs, has no series.
func TestJobsCollectorProgress(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	job := func(name string, running bool, st *trainer.TrainerStatus) trainer.TrainJob {
		tj := trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{api.LabelImplementation: "OpenMPI"}}}
		cond := metav1.Condition{Type: trainjob.ConditionRunning, Status: metav1.ConditionTrue, Reason: "Running"}
		if !running {
			cond = metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Completed"}
		}
		tj.Status.Conditions = []metav1.Condition{cond}
		tj.Status.TrainerStatus = st
		return tj
	}
	reported := metav1.NewTime(now.Add(-30 * time.Second))
	c := newJobsCollector(listed{
		job("train", true, &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](600), LastUpdatedTime: reported}),
		job("silent", true, nil),
		job("done", false, &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100), LastUpdatedTime: reported}),
	})
	c.now = func() time.Time { return now }
	want := `
# HELP torus_trainjob_progress_percent A running MPI TrainJob's progress as its program last reported it (status.trainerStatus.progressPercentage).
# TYPE torus_trainjob_progress_percent gauge
torus_trainjob_progress_percent{name="train",namespace="ns"} 42
# HELP torus_trainjob_remaining_seconds A running MPI TrainJob's time left by its program's last estimate, counted down since it reported it.
# TYPE torus_trainjob_remaining_seconds gauge
torus_trainjob_remaining_seconds{name="train",namespace="ns"} 570
# HELP torus_trainjob_progress_reported_timestamp_seconds When a running MPI TrainJob's program last reported its progress: time() minus this is how long it has been silent.
# TYPE torus_trainjob_progress_reported_timestamp_seconds gauge
torus_trainjob_progress_reported_timestamp_seconds{name="train",namespace="ns"} ` + fmt.Sprint(reported.Unix()) + `
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "torus_trainjob_progress_percent", "torus_trainjob_remaining_seconds", "torus_trainjob_progress_reported_timestamp_seconds"); err != nil {
		t.Error(err)
	}
}
