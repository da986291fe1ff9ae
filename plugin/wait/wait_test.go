package wait

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
