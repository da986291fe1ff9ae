package trainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTimesOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cond := func(typ string, status metav1.ConditionStatus, s int) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(sec(s))}
	}
	now := sec(100)
	cases := map[string]struct {
		conds        []metav1.Condition
		want         Times
		wantDuration time.Duration
		wantStarted  bool
	}{
		"not queued, its JobSet made: started at creation": {
			conds:        []metav1.Condition{cond(ConditionCreated, metav1.ConditionTrue, 1)},
			want:         Times{Created: t0, Started: t0},
			wantDuration: 100 * time.Second, wantStarted: true,
		},
		"no JobSet yet: not started": {
			conds: []metav1.Condition{cond(ConditionCreated, metav1.ConditionFalse, 1)},
			want:  Times{Created: t0},
		},
		"waiting in Kueue's queue: not started": {
			conds: []metav1.Condition{cond(ConditionCreated, metav1.ConditionTrue, 1), cond(ConditionAdmitted, metav1.ConditionFalse, 1)},
			want:  Times{Created: t0},
		},
		"admitted, all ranks up": {
			conds: []metav1.Condition{
				cond(ConditionCreated, metav1.ConditionTrue, 1), cond(ConditionAdmitted, metav1.ConditionTrue, 10),
				cond(ConditionRunning, metav1.ConditionTrue, 18),
			},
			want:         Times{Created: t0, Admitted: sec(10), Started: sec(10), Running: sec(18)},
			wantDuration: 90 * time.Second, wantStarted: true,
		},
		"complete: from admission to the end, whatever the time now": {
			conds: []metav1.Condition{
				cond(ConditionCreated, metav1.ConditionTrue, 1),
				cond(ConditionAdmitted, metav1.ConditionTrue, 10), cond(ConditionRunning, metav1.ConditionFalse, 70),
				cond(trainer.TrainJobComplete, metav1.ConditionTrue, 70),
			},
			want:         Times{Created: t0, Admitted: sec(10), Started: sec(10), Finished: sec(70)},
			wantDuration: 60 * time.Second, wantStarted: true,
		},
		"failed after a resume: counted from the resume": {
			conds: []metav1.Condition{
				cond(trainer.TrainJobSuspended, metav1.ConditionFalse, 40), cond(trainer.TrainJobFailed, metav1.ConditionTrue, 55),
			},
			want:         Times{Created: t0, Started: sec(40), Finished: sec(55)},
			wantDuration: 15 * time.Second, wantStarted: true,
		},
		"evicted by Kueue: waits again, not started": {
			conds: []metav1.Condition{cond(ConditionAdmitted, metav1.ConditionFalse, 30), cond(ConditionRunning, metav1.ConditionFalse, 30)},
			want:  Times{Created: t0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}
			tj.Status.Conditions = tc.conds
			got := TimesOf(tj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TimesOf (-want,+got):\n%s", diff)
			}
			d, ok := got.Duration(now)
			if ok != tc.wantStarted || d != tc.wantDuration {
				t.Errorf("Duration = %s, %v; want %s, %v", d, ok, tc.wantDuration, tc.wantStarted)
			}
		})
	}
}
