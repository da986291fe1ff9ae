package trainjob

import (
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LastStart is when the job last started: its last resume, or its creation
// when it was never suspended. A job Kueue queues through its JobSet starts
// when Kueue admits it, so that time in the queue does not count; queued
// reports that it has not been admitted (start is then zero). The operator's
// deadline and scheduling timeout count from here, and kubectl mpi's
// durations too.
func LastStart(tj *trainer.TrainJob, viaKueue bool) (start time.Time, queued bool) {
	start = tj.CreationTimestamp.Time
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionFalse {
		start = c.LastTransitionTime.Time
	}
	if !viaKueue {
		return start, false
	}
	c := meta.FindStatusCondition(tj.Status.Conditions, ConditionAdmitted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return time.Time{}, true
	}
	if c.LastTransitionTime.After(start) {
		start = c.LastTransitionTime.Time
	}
	return start, false
}

// Times are the moments a job went through, read from its conditions'
// transition times (the API is upstream's: no status fields of Torus's
// own). A zero time is a moment not reached, or not known.
type Times struct {
	Created time.Time
	// Admitted is when Kueue admitted the whole job; zero for a job
	// Kueue does not queue.
	Admitted time.Time
	// Started is when the job last started (LastStart): what Duration
	// counts from.
	Started time.Time
	// Running is since when all its ranks run; zero once it stopped
	// running (the Running condition's message then says when they were
	// up).
	Running  time.Time
	Finished time.Time
}

// TimesOf reads a job's times from its conditions.
func TimesOf(tj *trainer.TrainJob) Times {
	t := Times{Created: tj.CreationTimestamp.Time}
	// The operator writes Admitted only for the jobs Kueue queues.
	admitted := meta.FindStatusCondition(tj.Status.Conditions, ConditionAdmitted)
	if admitted != nil && admitted.Status == metav1.ConditionTrue {
		t.Admitted = admitted.LastTransitionTime.Time
	}
	if c := trueCondition(tj.Status.Conditions, ConditionRunning); c != nil {
		t.Running = c.LastTransitionTime.Time
	}
	if c := trueCondition(tj.Status.Conditions, trainer.TrainJobComplete); c != nil {
		t.Finished = c.LastTransitionTime.Time
	} else if c := trueCondition(tj.Status.Conditions, trainer.TrainJobFailed); c != nil {
		t.Finished = c.LastTransitionTime.Time
	}
	// A job whose JobSet was never made (no operator yet, a missing
	// runtime) has not started, however old it is.
	made := trueCondition(tj.Status.Conditions, ConditionCreated) != nil || !t.Finished.IsZero()
	if start, queued := LastStart(tj, admitted != nil); made && !queued {
		t.Started = start
	}
	return t
}

// Duration is how long the job ran, from its last start to its end or now,
// as kubectl get jobs counts a Job's; ok is false for a job not started.
func (t Times) Duration(now time.Time) (d time.Duration, ok bool) {
	if t.Started.IsZero() {
		return 0, false
	}
	end := now
	if !t.Finished.IsZero() {
		end = t.Finished
	}
	if end.Before(t.Started) {
		// A job that failed before it started (its deadline while it
		// was suspended, say) ran for no time.
		return 0, true
	}
	return end.Sub(t.Started), true
}
