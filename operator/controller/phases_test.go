package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// The resolve phase: a job blocked before it started says why and stops
// there; a started job whose runtime went or whose annotation went bad goes
// on as it started, recorded on its JobSet; a job resolved afresh keeps the
// sshd settings its pods started with. None of these asks the API server.
func TestResolvePhase(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI)
	tj := func() *trainer.TrainJob {
		return wrappers.MakeTrainJob("pi", "ns").UID("uid-1").RuntimeRef("rt").NumNodes(2).Obj()
	}
	// startedOn is the job's JobSet as Torus made it when the job started,
	// before any annotation, with StrictModes off (a JobSet an earlier Torus
	// made).
	startedOn := func(t *testing.T, tj *trainer.TrainJob) *jobsetv1alpha2.JobSet {
		t.Helper()
		tj = tj.DeepCopy()
		tj.Annotations = nil
		job, err := mpi.ResolveJob(tj, rt.Runtime())
		if err != nil {
			t.Fatal(err)
		}
		job.SSH.StrictModes = false
		js, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		testProofs.stamp(childJobSet, js, tj)
		return js
	}
	notMPI := wrappers.MakeMPIRuntime("plain", trainer.MPIImplementationOpenMPI).Runtime()
	notMPI.Spec.MLPolicy.MPI = nil
	cases := map[string]struct {
		tj          *trainer.TrainJob
		rt          *mpi.Runtime
		rtErr       error
		started     bool
		maxNodes    int32
		wantJob     bool
		wantFrozen  bool
		wantReason  string
		wantStrict  bool
		wantRecheck time.Duration
	}{
		"a runtime that does not exist, before the job started": {
			tj: tj(), rtErr: &trainjob.RuntimeRefError{NotFound: true}, wantReason: trainjob.ReasonRuntimeNotFound,
		},
		"a runtime that is not MPI": {
			tj: tj(), rt: notMPI, wantReason: trainjob.ReasonRuntimeNotSupported,
		},
		"an annotation with a bad value": {
			tj: func() *trainer.TrainJob {
				j := tj()
				j.Annotations = map[string]string{api.AnnotationSSHPort: "22"}
				return j
			}(),
			rt: rt.Runtime(), wantReason: trainjob.ReasonInvalidJob,
		},
		"more workers than the operator allows": {
			tj: tj(), rt: rt.Runtime(), maxNodes: 1, wantReason: trainjob.ReasonJobTooLarge,
		},
		"a started job whose runtime was deleted goes on as it started": {
			tj: tj(), rtErr: &trainjob.RuntimeRefError{NotFound: true}, started: true, wantJob: true, wantFrozen: true,
		},
		"a started job whose annotation went bad goes on as it started": {
			tj: func() *trainer.TrainJob {
				j := tj()
				j.Annotations = map[string]string{api.AnnotationSSHPort: "22"}
				return j
			}(),
			rt: rt.Runtime(), started: true, wantJob: true, wantFrozen: true,
		},
		"a job resolved afresh": {
			tj: tj(), rt: rt.Runtime(), wantJob: true, wantStrict: true,
		},
		"a started job resolved afresh keeps the sshd settings its pods started with": {
			tj: tj(), rt: rt.Runtime(), started: true, wantJob: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &TrainJobReconciler{maxNodes: 16384, proofs: testProofs}
			if tc.maxNodes > 0 {
				r.maxNodes = tc.maxNodes
			}
			s := &scope{tj: tc.tj, rt: tc.rt, rtErr: tc.rtErr, now: time.Now()}
			if tc.started {
				s.jobSet = startedOn(t, tc.tj)
			}
			if err := r.resolvePhase(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if s.frozen != tc.wantFrozen || s.requeueAfter() != tc.wantRecheck || (s.job != nil) != tc.wantJob || s.stop == tc.wantJob {
				t.Errorf("frozen, recheck, job, stop = %v, %v, %v, %v; want %v, %v, %v, %v", s.frozen, s.requeueAfter(), s.job != nil, s.stop, tc.wantFrozen, tc.wantRecheck, tc.wantJob, !tc.wantJob)
			}
			created := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionCreated)
			switch {
			case tc.wantReason == "" && created != nil:
				t.Errorf("Created = %s %s: %s, want no condition", created.Status, created.Reason, created.Message)
			case tc.wantReason != "" && (created == nil || created.Status != metav1.ConditionFalse || created.Reason != tc.wantReason):
				t.Errorf("Created = %+v, want False %s", created, tc.wantReason)
			}
			if s.job != nil && s.job.SSH.StrictModes != tc.wantStrict {
				t.Errorf("StrictModes = %v, want %v", s.job.SSH.StrictModes, tc.wantStrict)
			}
		})
	}
}

// The deadline phase stops a job whose activeDeadlineSeconds ran out since
// it last started, once, and warns once a run when it is close.
func TestDeadlinePhase(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		after       time.Duration
		wantStopped bool
		wantRequeue time.Duration
		wantEvents  []string
	}{
		"early: look again when the warning is due": {after: 10 * time.Second, wantRequeue: 70 * time.Second},
		"close: one warning, look again at the deadline": {after: 90 * time.Second, wantRequeue: 10 * time.Second,
			wantEvents: []string{trainjob.ReasonDeadlineApproaching}},
		"past: stopped, failed with the reason": {after: 100 * time.Second, wantStopped: true,
			wantEvents: []string{trainjob.ReasonDeadlineExceeded}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := wrappers.MakeTrainJob("pi", "ns").UID("uid-1").ActiveDeadlineSeconds(100).Obj()
			tj.CreationTimestamp = metav1.NewTime(t0)
			r := &TrainJobReconciler{metrics: NewMetrics()}
			var events []string
			for range 2 { // the same reconcile twice: one event, one warning
				s := &scope{tj: tj.DeepCopy(), now: t0.Add(tc.after)}
				if err := r.deadlinePhase(context.Background(), s); err != nil {
					t.Fatal(err)
				}
				if s.requeueAfter() != tc.wantRequeue || s.stop != tc.wantStopped {
					t.Errorf("requeue, stopped = %s, %v; want %s, %v", s.requeueAfter(), s.stop, tc.wantRequeue, tc.wantStopped)
				}
				for _, e := range s.events {
					events = append(events, e.reason)
				}
				if tc.wantStopped {
					tj = s.tj // the failure is saved
				}
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

// The requeue is decided in one place: the soonest any phase asked for,
// capped at expectationTTL while a child is awaited in the cache; an ask of
// zero or less asks nothing.
func TestRequeueAfter(t *testing.T) {
	cases := map[string]struct {
		asks       []time.Duration
		awaitCache bool
		want       time.Duration
	}{
		"nothing asked":                 {},
		"one ask":                       {asks: []time.Duration{30 * time.Second}, want: 30 * time.Second},
		"the soonest wins":              {asks: []time.Duration{30 * time.Second, 10 * time.Second, 20 * time.Second}, want: 10 * time.Second},
		"zero and less ask nothing":     {asks: []time.Duration{0, 30 * time.Second, -time.Second}, want: 30 * time.Second},
		"awaiting the cache":            {awaitCache: true, want: expectationTTL},
		"awaiting the cache, sooner":    {asks: []time.Duration{5 * time.Second}, awaitCache: true, want: 5 * time.Second},
		"awaiting the cache, later ask": {asks: []time.Duration{5 * time.Minute}, awaitCache: true, want: expectationTTL},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &scope{awaitCache: tc.awaitCache}
			for _, d := range tc.asks {
				s.lookAgain(d)
			}
			if got := s.requeueAfter(); got != tc.want {
				t.Errorf("requeueAfter = %s, want %s", got, tc.want)
			}
		})
	}
}
