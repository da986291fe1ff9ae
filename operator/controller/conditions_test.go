package controller

import (
	"slices"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/operator/trainjob"
)

func TestOrderConditionsShowsWhatHolds(t *testing.T) {
	c := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	cases := map[string]struct {
		in   []metav1.Condition
		last string
	}{
		"workers not scheduled":      {[]metav1.Condition{c("Created", "True"), c("Running", "False")}, "Created"},
		"running":                    {[]metav1.Condition{c("Created", "True"), c("Running", "True"), c("Suspended", "False")}, "Running"},
		"complete after running":     {[]metav1.Condition{c("Created", "True"), c("Running", "False"), c("Complete", "True")}, "Complete"},
		"failed, then Created again": {[]metav1.Condition{c("Failed", "True"), c("Created", "True")}, "Failed"},
		"suspended":                  {[]metav1.Condition{c("Suspended", "True"), c("Created", "False")}, "Suspended"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			orderConditions(tc.in)
			if got := tc.in[len(tc.in)-1].Type; got != tc.last {
				t.Errorf("last condition %s, want %s (%v)", got, tc.last, tc.in)
			}
		})
	}
}

func TestJobState(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status}
	}
	cases := []struct {
		name  string
		conds []metav1.Condition
		want  string
	}{
		{"new", nil, "Pending"},
		{"waiting in Kueue", []metav1.Condition{cond(trainjob.ConditionAdmitted, metav1.ConditionFalse)}, "Queued"},
		{"admitted, pods starting", []metav1.Condition{cond(trainjob.ConditionAdmitted, metav1.ConditionTrue), cond(trainjob.ConditionRunning, metav1.ConditionFalse)}, "Pending"},
		{"running", []metav1.Condition{cond(trainjob.ConditionRunning, metav1.ConditionTrue)}, "Running"},
		{"suspended", []metav1.Condition{cond(trainer.TrainJobSuspended, metav1.ConditionTrue)}, "Suspended"},
		{"completed", []metav1.Condition{cond(trainjob.ConditionRunning, metav1.ConditionFalse), cond(trainer.TrainJobComplete, metav1.ConditionTrue)}, "Completed"},
		{"failed", []metav1.Condition{cond(trainer.TrainJobFailed, metav1.ConditionTrue)}, "Failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := &trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: tc.conds}}
			if got := jobState(tj); got != tc.want {
				t.Errorf("jobState = %s, want %s", got, tc.want)
			}
			if !slices.Contains(JobStates, tc.want) {
				t.Errorf("%s is not among JobStates", tc.want)
			}
		})
	}
}
