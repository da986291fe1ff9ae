package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// A restart of the job's world is recorded on the job with why its run
// stopped, read from the run's pods, and whether it spent the budget, read
// from the JobSet's rule; the job reads Restarting until the new world's
// Jobs are ready, then Running with its run; a job whose budget is spent
// fails saying so.
func TestRecordRestarts(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	evicted := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-1-abcde", Labels: map[string]string{
			api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "1", mpi.LabelJobSetRestartAttempt: "0",
		}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(t0),
		}}},
	}
	// JobSet's words for a restart by a rule.
	restartingBy := func(rule string) metav1.Condition {
		return metav1.Condition{Type: string(jobsetv1alpha2.JobSetRestarting), Status: metav1.ConditionTrue, Reason: "FailurePolicy_" + rule, Message: "jobset restarted (first failed job: pi-node-0)"}
	}
	cases := map[string]struct {
		restarts, counted int32
		conds             []metav1.Condition
		pods              []corev1.Pod
		before            []metav1.Condition
		// wantPhase is the job's; wantRecord, the lines of its record.
		wantPhase  string
		wantReason string
		wantRecord []string
		wantFailed string
	}{
		"a worker evicted: not counted, its pod's words": {
			restarts: 1, conds: []metav1.Condition{restartingBy(children.RuleDisrupted)}, pods: []corev1.Pod{evicted},
			wantPhase: trainjob.PhaseRestarting, wantReason: trainjob.ReasonWorldLost,
			wantRecord: []string{
				"1 restart, 0 counted against the budget of 2",
				"run 0 stopped 2026-11-29T10:00:05Z (not counted): worker-1 (ranks 2-3) EvictionByEvictionAPI: it was evicted (a node drain, or another use of the Eviction API) (Eviction API: evicting); " +
					"not the program's failure: the job restarts without counting against its restart budget, and a program that keeps checkpoints (--checkpoint-volume) resumes from its last one [pod pi-node-0-1-abcde]",
			},
		},
		"the program failed, its pods gone: counted, the problem its pod reported": {
			restarts: 2, counted: 1, conds: []metav1.Condition{restartingBy("TorusOther")},
			before: []metav1.Condition{
				{Type: trainjob.ConditionRestarted, Status: metav1.ConditionTrue, Reason: trainjob.ReasonWorldLost,
					Message: "1 restart, 0 counted against the budget of 2\nrun 0 stopped 2026-11-29T09:00:00Z (not counted): worker-1 EvictionByEvictionAPI"},
				{Type: trainjob.ConditionRunning, Status: metav1.ConditionFalse, Reason: trainjob.ReasonPodProblem, Message: "launcher Error: container node exited with code 1"},
			},
			wantPhase: trainjob.PhaseRestarting, wantReason: trainjob.ReasonProgramFailed,
			wantRecord: []string{
				"2 restarts, 1 counted against the budget of 2",
				"run 0 stopped 2026-11-29T09:00:00Z (not counted): worker-1 EvictionByEvictionAPI",
				"run 1 stopped 2026-11-29T10:00:05Z (counted): launcher Error: container node exited with code 1",
			},
		},
		"the new world's Jobs ready: Running, with its run": {
			restarts: 1, conds: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetRestarting), Status: metav1.ConditionFalse, Reason: "JobsReady"}},
			before: []metav1.Condition{{Type: trainjob.ConditionRestarted, Status: metav1.ConditionTrue, Reason: trainjob.ReasonWorldLost,
				Message: "1 restart, 0 counted against the budget of 2\nrun 0 stopped 2026-11-29T09:00:00Z (not counted): worker-1 EvictionByEvictionAPI"}},
			pods:      runningPods("1"),
			wantPhase: trainjob.PhaseRunning, wantReason: trainjob.ReasonWorldLost,
			wantRecord: []string{
				"1 restart, 0 counted against the budget of 2",
				"run 0 stopped 2026-11-29T09:00:00Z (not counted): worker-1 EvictionByEvictionAPI",
			},
		},
		"the budget spent: the failure says so": {
			restarts: 2, counted: 2, conds: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue, Reason: "ReachedMaxRestarts", Message: "jobset failed due to reaching max number of restarts"}},
			before: []metav1.Condition{{Type: trainjob.ConditionRestarted, Status: metav1.ConditionTrue, Reason: trainjob.ReasonProgramFailed,
				Message: "2 restarts, 2 counted against the budget of 2\nrun 0 stopped 2026-11-29T09:00:00Z (counted): a\nrun 1 stopped 2026-11-29T09:10:00Z (counted): b"}},
			wantPhase: trainjob.PhaseFailed, wantReason: trainjob.ReasonProgramFailed,
			wantRecord: []string{
				"2 restarts, 2 counted against the budget of 2",
				"run 0 stopped 2026-11-29T09:00:00Z (counted): a",
				"run 1 stopped 2026-11-29T09:10:00Z (counted): b",
			},
			wantFailed: "After 2 restarts, 2 counted against the budget of 2 (kubectl mpi describe pi says why each run stopped): ",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns"}}
			tj.Status.Conditions = append([]metav1.Condition{{Type: trainjob.ConditionCreated, Status: metav1.ConditionTrue, Reason: trainjob.ReasonJobSetCreated}}, tc.before...)
			js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns"}}
			js.Status.Restarts, js.Status.RestartsCountTowardsMax = tc.restarts, tc.counted
			js.Status.Conditions = tc.conds
			js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: mpi.NodeJob}}
			s := &scope{tj: tj, jobSet: js, pods: tc.pods, now: t0.Add(5 * time.Second),
				job: &mpi.Job{Workers: 2, SlotsPerHost: 2, MaxRestarts: 2}}
			r := &TrainJobReconciler{metrics: NewMetrics()}
			r.syncStatus(s)

			st := trainjob.StateOf(tj)
			if st.Phase != tc.wantPhase {
				t.Errorf("phase %s (%s), want %s", st.Phase, st.Message, tc.wantPhase)
			}
			// A job without a checkpoint claim is told that its program
			// starts again from the start.
			if want := fmt.Sprintf("Starting run %d, which starts the program again: the job keeps no checkpoints (--checkpoint-volume); run %d stopped: ", tc.restarts, tc.restarts-1); st.Phase == trainjob.PhaseRestarting && !strings.HasPrefix(st.Message, want) {
				t.Errorf("Restarting says %q, want it to begin %q", st.Message, want)
			}
			c := meta.FindStatusCondition(tj.Status.Conditions, trainjob.ConditionRestarted)
			if c == nil {
				t.Fatal("no Restarted condition")
			}
			if got := strings.Split(c.Message, "\n"); c.Reason != tc.wantReason || strings.Join(got, "\n") != strings.Join(tc.wantRecord, "\n") {
				t.Errorf("Restarted %s:\n%s\nwant %s:\n%s", c.Reason, c.Message, tc.wantReason, strings.Join(tc.wantRecord, "\n"))
			}
			// The record reads back as written.
			if rec := trainjob.RestartsOf(tj); rec.Message() != c.Message || rec.Total != tc.restarts {
				t.Errorf("read back %+v, rendering\n%s", rec, rec.Message())
			}
			if tc.wantFailed != "" {
				if f := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); f == nil || !strings.Contains(f.Message, tc.wantFailed) {
					t.Errorf("Failed %+v, want it to say %q", f, tc.wantFailed)
				}
			}
		})
	}
}

// runningPods are a running launcher and two ready workers of run attempt.
func runningPods(attempt string) []corev1.Pod {
	pod := func(role, index string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: role + index, Labels: map[string]string{
				api.LabelJobName: "pi", api.LabelRole: role, "batch.kubernetes.io/job-completion-index": index, mpi.LabelJobSetRestartAttempt: attempt,
			}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			},
		}
	}
	return []corev1.Pod{pod(api.RoleLauncher, "0"), pod(api.RoleWorker, "0"), pod(api.RoleWorker, "1")}
}

// The restart's cause is the run's earliest end the operator saw, though
// its pod is gone when the JobSet's restart is seen and only the pods the
// restart stopped after it are left.
func TestRestartCauseOutlivesItsPod(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	ended := func(index string, code int32, at time.Time) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-" + index + "-abcde", Labels: map[string]string{
				api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": index, mpi.LabelJobSetRestartAttempt: "0",
			}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: mpi.TrainerContainer}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(at)}}}}},
		}
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns"}}
	tj.Status.Conditions = []metav1.Condition{{Type: trainjob.ConditionCreated, Status: metav1.ConditionTrue, Reason: trainjob.ReasonJobSetCreated}}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns"}}
	js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: mpi.NodeJob}}
	r := &TrainJobReconciler{metrics: NewMetrics()}
	job := &mpi.Job{Workers: 2, SlotsPerHost: 2, MaxRestarts: 2}

	// Worker 1 fails first; the run has not restarted yet.
	r.syncStatus(&scope{tj: tj, jobSet: js, pods: []corev1.Pod{ended("1", 3, t0)}, now: t0.Add(time.Second), job: job})
	// The restart, once worker 1's pod is gone and worker 0, which the
	// restart stopped, is left.
	js = js.DeepCopy()
	js.Status.Restarts, js.Status.RestartsCountTowardsMax = 1, 1
	js.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetRestarting), Status: metav1.ConditionTrue, Reason: "FailurePolicy_TorusOther"}}
	r.syncStatus(&scope{tj: tj, jobSet: js, pods: []corev1.Pod{ended("0", 143, t0.Add(3*time.Second))}, now: t0.Add(5 * time.Second), job: job})

	rec := trainjob.RestartsOf(tj)
	if len(rec.Latest) != 1 || !strings.HasPrefix(rec.Latest[0].Cause, "worker-1 (ranks 2-3) Error: container node exited with code 3") {
		t.Errorf("the restart's cause is %q, want worker 1's exit", rec.Latest)
	}
}

// A new run's pods wait out the back-off of the restarts before it,
// whether or not the record has taken the latest restart in yet.
func TestRestartHold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	no := false
	record := func(xs ...trainjob.Restart) []metav1.Condition {
		rec := trainjob.Restarts{Total: int32(len(xs)), Latest: xs}
		return []metav1.Condition{{Type: trainjob.ConditionRestarted, Status: metav1.ConditionTrue, Reason: trainjob.ReasonWorldLost, Message: rec.Message()}}
	}
	tests := []struct {
		name              string
		conditions        []metav1.Condition
		restarts, counted int32
		want              time.Duration
	}{
		{name: "the first run", want: 0},
		{name: "one restart, not recorded yet: at once", restarts: 1, want: 0},
		{name: "one restart, recorded: at once", restarts: 1, conditions: record(trainjob.Restart{Run: 0, At: t0, Counted: &no}), want: -5 * time.Second},
		{name: "a second in a row, not recorded yet: the back-off from now", restarts: 2,
			conditions: record(trainjob.Restart{Run: 0, At: t0, Counted: &no}), want: trainjob.RestartBackoffBase},
		{name: "a second in a row, recorded: the rest of the back-off", restarts: 2,
			conditions: record(trainjob.Restart{Run: 0, At: t0.Add(-time.Minute), Counted: &no}, trainjob.Restart{Run: 1, At: t0, Counted: &no}),
			want:       trainjob.RestartBackoffBase - 5*time.Second},
		{name: "a second the JobSet counted: at once", restarts: 2, counted: 1,
			conditions: record(trainjob.Restart{Run: 0, At: t0, Counted: &no}), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tj := &trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: tc.conditions}}
			js := &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{Restarts: tc.restarts, RestartsCountTowardsMax: tc.counted}}
			now := t0.Add(5 * time.Second)
			if got := restartHold(&scope{tj: tj, jobSet: js, now: now}); got != tc.want && !(tc.want <= 0 && got <= 0) {
				t.Errorf("restartHold = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOldRunWait(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	pod := func(name, attempt, node string, deleteEnds *time.Time, phase corev1.PodPhase) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{mpi.LabelJobSetRestartAttempt: attempt}},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if deleteEnds != nil {
			p.DeletionTimestamp = &metav1.Time{Time: *deleteEnds}
		}
		return p
	}
	past, future := t0.Add(-time.Second), t0.Add(20*time.Second)
	for _, tc := range []struct {
		name      string
		pods      []corev1.Pod
		want      string
		wantAgain time.Duration
	}{
		{name: "no pod of an earlier run", pods: []corev1.Pod{pod("pi-node-0-0", "1", "n0", nil, corev1.PodPending)}},
		{
			name: "an old pod in its grace period: named, and looked at again when the period ends",
			pods: []corev1.Pod{pod("pi-node-0-1", "0", "n1", &future, corev1.PodRunning), pod("pi-launcher-0-0", "1", "n0", nil, corev1.PodPending)},
			want: ". It waits for the earlier run's pods to go: pi-node-0-1 on n1", wantAgain: 21 * time.Second,
		},
		{
			name: "an old pod past its grace period on a node that never confirmed: how Kubernetes lets it go",
			pods: []corev1.Pod{pod("pi-node-0-1", "0", "n1", &past, corev1.PodRunning)},
			want: ". It waits for the earlier run's pods to go: pi-node-0-1 on n1; pi-node-0-1's node has not confirmed that it stopped by the end of its grace period: " +
				"if n1 is down, Kubernetes lets the pod go once the Node is deleted or tainted out of service (kubectl taint node n1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute)",
		},
		{
			name: "an old pod that ended, held by the Job's finalizer: no word of its node",
			pods: []corev1.Pod{pod("pi-node-0-1", "0", "n1", &past, corev1.PodFailed)},
			want: ". It waits for the earlier run's pods to go: pi-node-0-1 on n1",
		},
		{
			name: "many old pods: the first few by name",
			pods: []corev1.Pod{
				pod("pi-node-0-3", "0", "n3", nil, corev1.PodRunning), pod("pi-node-0-1", "0", "n1", nil, corev1.PodRunning),
				pod("pi-node-0-2", "1", "n2", nil, corev1.PodRunning), pod("pi-node-0-0", "0", "", nil, corev1.PodPending),
				pod("pi-launcher-0-0", "0", "n0", nil, corev1.PodRunning),
			},
			want: ". It waits for the earlier run's pods to go: pi-launcher-0-0 on n0, pi-node-0-0, pi-node-0-1 on n1, 1 more",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{pods: tc.pods, now: t0}
			if got := s.oldRunWait(1); got != tc.want {
				t.Errorf("oldRunWait:\n got %q\nwant %q", got, tc.want)
			}
			if s.recheck != tc.wantAgain {
				t.Errorf("looks again after %v, want %v", s.recheck, tc.wantAgain)
			}
		})
	}
}
