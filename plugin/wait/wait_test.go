package wait

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/pkg/trainjob"
)

func TestParseFor(t *testing.T) {
	for in, want := range map[string]Condition{
		"condition=Complete": Complete, "condition=failed": Failed, "condition=RUNNING": Running,
	} {
		if got, err := parseFor(in); err != nil || got != want {
			t.Errorf("ParseFor(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Complete", "condition=Succeeded", "condition=", "delete"} {
		if _, err := parseFor(in); err == nil {
			t.Errorf("ParseFor(%q) succeeded, want an error", in)
		}
	}
}

func TestCheck(t *testing.T) {
	job := func(typ string) *trainer.TrainJob {
		tj := &trainer.TrainJob{}
		if typ != "" {
			tj.Status.Conditions = []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue}}
		}
		return tj
	}
	type result struct {
		outcome verdict
		done    bool
	}
	cases := []struct {
		cond  Condition
		state string
		want  result
	}{
		{Complete, trainer.TrainJobComplete, result{reached, true}},
		{Complete, trainer.TrainJobFailed, result{unreachable, true}},
		{Complete, trainjob.ConditionRunning, result{0, false}},
		{Failed, trainer.TrainJobFailed, result{reached, true}},
		{Failed, trainer.TrainJobComplete, result{unreachable, true}},
		{Running, trainjob.ConditionRunning, result{reached, true}},
		{Running, trainer.TrainJobComplete, result{reached, true}},
		{Running, trainer.TrainJobFailed, result{unreachable, true}},
		{Running, "", result{0, false}},
	}
	for _, tc := range cases {
		outcome, done := settled(tc.cond, job(tc.state))
		if got := (result{outcome, done}); got != tc.want {
			t.Errorf("Check(%s, job %s) = %+v, want %+v", tc.cond, tc.state, got, tc.want)
		}
	}
}

func TestProgressOf(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := metav1.NewTime(now.Add(-30 * time.Second))
	for _, tc := range []struct {
		name  string
		rep   *trainer.TrainerStatus
		phase string
		want  string
	}{
		{name: "no report", phase: trainjob.PhaseRunning},
		{name: "metrics alone", phase: trainjob.PhaseRunning, rep: &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "loss", Value: "1"}}}},
		{name: "running", phase: trainjob.PhaseRunning, rep: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](600), LastUpdatedTime: at}, want: "42%, about 9m30s left"},
		{name: "restarting: no time left", phase: trainjob.PhaseRestarting, rep: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](600), LastUpdatedTime: at}, want: "42%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := &trainer.TrainJob{Status: trainer.TrainJobStatus{TrainerStatus: tc.rep}}
			if got := progressOf(tj, trainjob.State{Phase: tc.phase}, now); got != tc.want {
				t.Errorf("progressOf = %q, want %q", got, tc.want)
			}
		})
	}
}
