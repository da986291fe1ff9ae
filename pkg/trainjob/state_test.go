package trainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStateOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string, s int) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: at(s)}
	}
	cases := map[string]struct {
		conds []metav1.Condition
		want  State
	}{
		"JobSet not started": {
			conds: []metav1.Condition{cond(ConditionCreated, metav1.ConditionUnknown, "JobSetNotReported", "JobSet pi exists, but", 1)},
			want:  State{Phase: PhaseCreating, Since: t0.Add(time.Second), Reason: "JobSetNotReported", Message: "JobSet pi exists, but"},
		},
		"nothing yet": {want: State{Phase: PhaseCreating, Since: t0, Message: "Waiting for the Torus operator to create the job's JobSet, and the JobSet controller to start it"}},
		"queued by Kueue": {
			conds: []metav1.Condition{
				cond(ConditionCreated, metav1.ConditionTrue, "JobSetCreated", "", 1),
				cond(ConditionAdmitted, metav1.ConditionFalse, "Queued", `Waiting in LocalQueue "team" for quota`, 2),
				cond(ConditionRunning, metav1.ConditionFalse, "Queued", `Waiting in LocalQueue "team" for quota`, 2),
			},
			want: State{Phase: PhaseQueued, Since: t0.Add(2 * time.Second), Reason: "Queued", Message: `Waiting in LocalQueue "team" for quota`},
		},
		"pending since admission, not since the last message": {
			conds: []metav1.Condition{
				cond(ConditionCreated, metav1.ConditionTrue, "JobSetCreated", "", 1),
				cond(ConditionAdmitted, metav1.ConditionTrue, "Admitted", "", 5),
				cond(ConditionRunning, metav1.ConditionFalse, "Pending", "1/2 workers ready", 9),
			},
			want: State{Phase: PhasePending, Since: t0.Add(5 * time.Second), Reason: "Pending", Message: "1/2 workers ready"},
		},
		"running": {
			conds: []metav1.Condition{cond(ConditionRunning, metav1.ConditionTrue, "Running", "Launcher running", 3)},
			want:  State{Phase: PhaseRunning, Since: t0.Add(3 * time.Second), Reason: "Running", Message: "Launcher running"},
		},
		"running, probably stuck": {
			conds: []metav1.Condition{cond(ConditionRunning, metav1.ConditionTrue, "Running", "Launcher running", 3),
				cond(ConditionStalled, metav1.ConditionTrue, ReasonQuietAfterFailure, "Probably stuck: rank 1 raised", 9)},
			want: State{Phase: PhaseRunning, Since: t0.Add(3 * time.Second), Reason: "Running", Message: "Launcher running",
				Stalled: "Probably stuck: rank 1 raised", StalledSince: t0.Add(9 * time.Second)},
		},
		"no longer stuck": {
			conds: []metav1.Condition{cond(ConditionRunning, metav1.ConditionTrue, "Running", "Launcher running", 3),
				cond(ConditionStalled, metav1.ConditionFalse, "OutputResumed", "", 9)},
			want: State{Phase: PhaseRunning, Since: t0.Add(3 * time.Second), Reason: "Running", Message: "Launcher running"},
		},
		"blocked on a missing runtime": {
			conds: []metav1.Condition{cond(ConditionCreated, metav1.ConditionFalse, "RuntimeNotFound", "not found", 1)},
			want:  State{Phase: PhaseBlocked, Since: t0.Add(time.Second), Reason: "RuntimeNotFound", Message: "not found"},
		},
		"failed wins": {
			conds: []metav1.Condition{
				cond(ConditionRunning, metav1.ConditionFalse, "Failed", "x", 4),
				cond(trainer.TrainJobFailed, metav1.ConditionTrue, "Failed", "worker-1 OOMKilled", 4),
			},
			want: State{Phase: PhaseFailed, Since: t0.Add(4 * time.Second), Reason: "Failed", Message: "worker-1 OOMKilled"},
		},
		"complete": {
			conds: []metav1.Condition{cond(trainer.TrainJobComplete, metav1.ConditionTrue, "Completed", "The launcher completed", 8)},
			want:  State{Phase: PhaseComplete, Since: t0.Add(8 * time.Second), Reason: "Completed", Message: "The launcher completed"},
		},
		"suspended": {
			conds: []metav1.Condition{cond(trainer.TrainJobSuspended, metav1.ConditionTrue, "Suspended", "suspended", 2)},
			want:  State{Phase: PhaseSuspended, Since: t0.Add(2 * time.Second), Reason: "Suspended", Message: "suspended"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(0)}}
			tj.Status.Conditions = tc.conds
			if diff := cmp.Diff(tc.want, StateOf(tj)); diff != "" {
				t.Errorf("StateOf (-want,+got):\n%s", diff)
			}
		})
	}
}
