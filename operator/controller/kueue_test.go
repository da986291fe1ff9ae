package controller

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/pkg/trainjob"
)

// Kueue's eviction of an admitted job goes into its record of restarts
// once, with Kueue's words and the run it stopped; a job evicted before
// it was admitted, or seen evicted again, adds nothing.
func TestSyncAdmissionRecordsEvictions(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	admitted := metav1.Condition{Type: trainjob.ConditionAdmitted, Status: metav1.ConditionTrue, Reason: trainjob.ReasonAdmitted, LastTransitionTime: metav1.NewTime(t0)}
	evictedWL := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{
		Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a workload due to prioritization in the ClusterQueue",
	}}}}
	js := &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{Restarts: 2}}

	s := &scope{tj: &trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{admitted}}}, jobSet: js, now: t0.Add(time.Minute)}
	s.syncAdmission("team", evictedWL)
	if !s.evictedNow {
		t.Fatal("the eviction of an admitted job was not taken")
	}
	rec := trainjob.RestartsOf(s.tj)
	if rec.Evictions != 1 || len(rec.Latest) != 1 || !rec.Latest[0].Evicted || rec.Latest[0].Run != 2 ||
		rec.Latest[0].Cause != "Preempted: Preempted to accommodate a workload due to prioritization in the ClusterQueue" {
		t.Fatalf("record after the eviction: %+v", rec)
	}
	if c := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionRestarted); c == nil || c.Reason != trainjob.ReasonEvicted {
		t.Errorf("Restarted condition: %+v", c)
	}

	// The next reconcile finds the job already evicted: nothing more.
	again := &scope{tj: s.tj.DeepCopy(), jobSet: js, now: t0.Add(2 * time.Minute)}
	again.syncAdmission("team", evictedWL)
	if again.evictedNow || trainjob.RestartsOf(again.tj).Evictions != 1 {
		t.Errorf("an eviction seen again was recorded again: %+v", trainjob.RestartsOf(again.tj))
	}

	// A job Kueue never admitted has no run to stop.
	never := &scope{tj: &trainer.TrainJob{}, jobSet: js, now: t0}
	never.syncAdmission("team", evictedWL)
	if never.evictedNow || meta.FindStatusCondition(never.tj.Status.Conditions, trainjob.ConditionRestarted) != nil {
		t.Errorf("an eviction before admission was recorded: %v", never.tj.Status.Conditions)
	}
}
