package wait

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/operatorstatus"
)

// oneJob serves one TrainJob that never changes: the wait's own reads.
// How the API server watches is tested in test/integration/plugin.
type oneJob struct {
	client.WithWatch // nil: only Get and Watch are called
	tj               *trainer.TrainJob
}

func (c *oneJob) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.tj.DeepCopyInto(obj.(*trainer.TrainJob))
	return nil
}

func (c *oneJob) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func TestWaitStopsWhenTheOperatorIsDown(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	running := operatorstatus.Status{Known: true, Running: true, Namespace: "torus-system", Holder: "torus-0_abc", LastRenewal: t0, LeaseDuration: 15 * time.Second}
	down := operatorstatus.Status{Known: true, Namespace: "torus-system", Holder: "torus-0_abc",
		LastRenewal: t0.Add(-3 * time.Minute), LeaseDuration: 15 * time.Second, Age: 3 * time.Minute}
	unknown := operatorstatus.Status{Err: errors.New("leases is forbidden")}
	const downMsg = "MPI job pi-demo cannot progress: the Torus operator is not running (last lease renewal 3m ago in namespace torus-system); " +
		"check its pods and logs: kubectl -n torus-system get pods -l app.kubernetes.io/name=torus; kubectl -n torus-system logs deploy/torus-operator --previous"
	complete := []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Completed", LastTransitionTime: metav1.NewTime(t0)}}

	tc := map[string]struct {
		conditions []metav1.Condition
		// operator is what each check finds, the last one repeating.
		operator []operatorstatus.Status
		timeout  time.Duration
		// wantChecks: how many times the lease was read; wantElapsed: how
		// far the fake clock went, 10 s per re-check.
		wantChecks  int
		wantElapsed time.Duration
		wantCode    int
		wantErr     string
	}{
		"down when the wait starts": {
			operator:   []operatorstatus.Status{down},
			wantChecks: 1, wantCode: cmdutil.ExitFailure, wantErr: downMsg,
		},
		"dies while waiting": {
			operator:   []operatorstatus.Status{running, running, down},
			wantChecks: 3, wantElapsed: 20 * time.Second, wantCode: cmdutil.ExitFailure, wantErr: downMsg,
		},
		"unknown: waits as before, until the timeout": {
			operator:   []operatorstatus.Status{unknown},
			timeout:    200 * time.Millisecond,
			wantChecks: 1, wantCode: cmdutil.ExitTimeout,
			wantErr: "timed out after 200ms waiting for MPI job pi-demo to be Complete; it is Creating: Waiting for the Torus operator to create the job's JobSet, and the JobSet controller to start it",
		},
		"a job that completed needs no operator": {
			conditions: complete,
			operator:   []operatorstatus.Status{down},
			wantCode:   cmdutil.ExitOK,
		},
	}
	for name, tc := range tc {
		t.Run(name, func(t *testing.T) {
			tj := mpi.NewTrainJob("pi-demo", "ns")
			tj.Labels = map[string]string{api.LabelImplementation: string(mpi.OpenMPI)}
			tj.CreationTimestamp = metav1.NewTime(t0)
			tj.Status.Conditions = tc.conditions
			fc := testingclock.NewFakeClock(t0)
			var mu sync.Mutex
			checks := 0
			w := &Waiter{Client: &oneJob{tj: tj}, ErrOut: &bytes.Buffer{}, Clock: fc, Timeout: tc.timeout,
				Operator: func(context.Context) operatorstatus.Status {
					mu.Lock()
					defer mu.Unlock()
					st := tc.operator[min(checks, len(tc.operator)-1)]
					checks++
					if checks < len(tc.operator) {
						// The next check is due: the watchdog's
						// ticker holds this tick until it looks.
						fc.Step(operatorCheckInterval)
					}
					return st
				}}
			if w.Timeout == 0 {
				// A wait that does not end when it should fails the
				// test as a timeout rather than hanging it.
				w.Timeout = 10 * time.Second
			}
			_, err := w.Until(context.Background(), "ns", "pi-demo", Complete)
			if got := cmdutil.Code(err); got != tc.wantCode {
				t.Errorf("exit code %d (%v), want %d", got, err, tc.wantCode)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if checks != tc.wantChecks {
				t.Errorf("the operator was checked %d times, want %d", checks, tc.wantChecks)
			}
			if got := fc.Since(t0); got != tc.wantElapsed {
				t.Errorf("the clock went %s, want %s", got, tc.wantElapsed)
			}
		})
	}
}
