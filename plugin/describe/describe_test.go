package describe

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/operatorstatus"
	"github.com/torus-mpi/torus/plugin/run"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func workerPod(name string, index int, node string, terminated *corev1.ContainerStateTerminated) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{
			api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": string(rune('0' + index)),
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: mpi.TrainerContainer, Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	cs := corev1.ContainerStatus{Name: mpi.TrainerContainer, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if terminated != nil {
		p.Status.Phase = corev1.PodFailed
		cs.Ready, cs.State = false, corev1.ContainerState{Terminated: terminated}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	return p
}

func failedJob() *data {
	tj := run.BuildTrainJob(run.Spec{Name: "pi", Namespace: "ns", Image: "img", Command: []string{"mpirun", "./pi"},
		Workers: ptr.To[int32](2), SlotsPerWorker: ptr.To[int32](2), Queue: "team"})
	tj.Annotations = map[string]string{api.AnnotationRerunOf: "pi-1"}
	tj.CreationTimestamp = metav1.NewTime(t0)
	tj.Status.Conditions = []metav1.Condition{
		{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobSetCreated", LastTransitionTime: metav1.NewTime(t0)},
		{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "Failed", LastTransitionTime: metav1.NewTime(t0.Add(time.Minute)),
			Message: "worker-1 (ranks 2-3) OOMKilled: memory limit 1Gi exceeded"},
	}
	info := &job.Info{TrainJob: tj, Job: &mpi.Job{Name: "pi", Namespace: "ns", Implementation: mpi.OpenMPI, NumNodes: 2, Workers: 2, SlotsPerHost: 2}}
	return &data{
		Info: info,
		Pods: []corev1.Pod{
			workerPod("pi-node-0-0", 0, "node-a", nil),
			workerPod("pi-node-0-1", 1, "node-b", &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(t0.Add(50 * time.Second))}),
		},
		Events: []corev1.Event{{
			InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", Name: "pi"}, Type: "Warning", Reason: "Failed",
			Message: "worker-1 (ranks 2-3) OOMKilled", LastTimestamp: metav1.NewTime(t0.Add(time.Minute)),
		}},
	}
}

// A failed job's failing rank, the reason and the fix come first.
func TestFailureInFirstLines(t *testing.T) {
	var out bytes.Buffer
	if err := write(&out, failedJob(), t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(squash(out.String()), "\n")
	first := strings.Join(lines[:10], "\n")
	for _, want := range []string{
		"State: Failed for 2m (since 2026-01-01T12:01:00Z)",
		"Failed rank: worker-1 (ranks 2-3), pod pi-node-0-1 on node node-b",
		"Reason: OOMKilled: memory limit 1Gi exceeded",
		"Fix: raise --memory",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the first 10 lines lack %q:\n%s", want, first)
		}
	}
	for _, want := range []string{
		"MPI: Open MPI 4: 2 workers × 2 slots = 4 ranks; the launcher runs no ranks",
		"Queue: team",
		"Rerun of: pi-1",
		" - launcher <none> Deleted",
		" 0-1 worker-0 pi-node-0-0 node-a Running 0",
		" 2-3 worker-1 pi-node-0-1 node-b OOMKilled 0 OOMKilled (exit 137)",
		" Failed True Failed 2m worker-1 (ranks 2-3) OOMKilled: memory limit 1Gi exceeded",
		" 2m Warning Failed trainjob/pi worker-1 (ranks 2-3) OOMKilled",
	} {
		if !strings.Contains(squash(out.String()), want) {
			t.Errorf("the description lacks %q:\n%s", want, out.String())
		}
	}
}

// A job Torus stopped fails for that, even while the pod it waited for is
// still there (ErrImageNeverPull, about to be deleted).
func TestStoppedJobFailsForItsOwnReason(t *testing.T) {
	for _, reason := range []string{trainjob.ReasonSchedulingTimeout, trainjob.ReasonDeadlineExceeded} {
		d := failedJob()
		msg := "Not all ranks ran within the scheduling timeout of 40s; it waited for: worker-1 (ranks 2-3) ErrImageNeverPull"
		d.Info.TrainJob.Status.Conditions[1].Reason, d.Info.TrainJob.Status.Conditions[1].Message = reason, msg
		d.Pods[1].Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}
		var out bytes.Buffer
		if err := write(&out, d, t0.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		first := strings.Join(strings.Split(squash(out.String()), "\n")[:4], "\n")
		if !strings.Contains(first, "Reason: "+msg) || strings.Contains(first, "Failed rank") {
			t.Errorf("%s: the first lines are not the job's own reason:\n%s", reason, first)
		}
	}
}

func TestPendingSaysWhy(t *testing.T) {
	d := failedJob()
	d.Info.TrainJob.Status.Conditions = []metav1.Condition{
		{Type: "Admitted", Status: metav1.ConditionFalse, Reason: "Queued", Message: `Waiting in LocalQueue "team": insufficient nvidia.com/gpu`, LastTransitionTime: metav1.NewTime(t0)},
	}
	d.Pods = nil
	var out bytes.Buffer
	if err := write(&out, d, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	first := strings.Join(strings.Split(squash(out.String()), "\n")[:5], "\n")
	for _, want := range []string{"State: Queued for 30s", `Waiting: Waiting in LocalQueue "team": insufficient nvidia.com/gpu`} {
		if !strings.Contains(first, want) {
			t.Errorf("the first lines lack %q:\n%s", want, first)
		}
	}
}

// A job that waits on an operator known not to run says so, with where to
// look; when the operator's state is unknown the job reads as before.
func TestOperatorNotRunning(t *testing.T) {
	down := operatorstatus.Status{Known: true, Namespace: "torus-system", Holder: "torus-0_abc",
		LastRenewal: t0.Add(-3 * time.Minute), LeaseDuration: 15 * time.Second, Age: 3 * time.Minute}
	unknown := operatorstatus.Status{Err: errors.New("forbidden")}
	const fix = "Fix: check its pods and logs: kubectl -n torus-system get pods -l app.kubernetes.io/name=torus; kubectl -n torus-system logs deploy/torus-operator --previous"
	pending := []metav1.Condition{{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobSetCreated", LastTransitionTime: metav1.NewTime(t0)}}
	complete := []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Completed", Message: "done", LastTransitionTime: metav1.NewTime(t0)}}
	tc := map[string]struct {
		conditions []metav1.Condition
		operator   operatorstatus.Status
		// wantLines follow State:, in order.
		wantLines []string
	}{
		"creating, operator down": {
			operator:  down,
			wantLines: []string{"Waiting: the Torus operator is not running (last lease renewal 3m ago in namespace torus-system)", fix},
		},
		"creating, operator unknown": {
			operator:  unknown,
			wantLines: []string{"Waiting: Waiting for the Torus operator to create the job's JobSet, and the JobSet controller to start it"},
		},
		"pending, operator down": {
			conditions: pending,
			operator:   down,
			wantLines:  []string{"Warning: the job cannot progress: the Torus operator is not running (last lease renewal 3m ago in namespace torus-system)", fix},
		},
		"complete, operator down": {
			conditions: complete,
			operator:   down,
			wantLines:  []string{"Status: done"},
		},
	}
	for name, tc := range tc {
		t.Run(name, func(t *testing.T) {
			d := failedJob()
			d.Info.TrainJob.Status.Conditions = tc.conditions
			d.Pods, d.Events, d.Operator = nil, nil, tc.operator
			var out bytes.Buffer
			if err := write(&out, d, t0.Add(30*time.Second)); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(squash(out.String()), "\n")
			var got []string
			for i, l := range lines {
				if strings.HasPrefix(l, "State:") {
					got = lines[i+1 : i+1+len(tc.wantLines)]
				}
			}
			if diff := cmp.Diff(tc.wantLines, got); diff != "" {
				t.Errorf("the lines after State: (-want,+got):\n%s\nin:\n%s", diff, out.String())
			}
		})
	}
}

// squash collapses runs of spaces, so that tests do not depend on column
// widths.
func squash(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lead := ""
		if strings.HasPrefix(l, " ") {
			lead = " "
		}
		lines[i] = lead + strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func TestShellJoin(t *testing.T) {
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"mpirun", "-n", "4", "/opt/torus/pi.py"}, "mpirun -n 4 /opt/torus/pi.py"},
		{[]string{"sh", "-c", "mpirun ./pi && sleep 1"}, "sh -c 'mpirun ./pi && sleep 1'"},
		{[]string{"echo", "it's", ""}, `echo 'it'\''s' ''`},
	}
	for _, tc := range cases {
		if got := shellJoin(tc.words); got != tc.want {
			t.Errorf("shellJoin(%q) = %s, want %s", tc.words, got, tc.want)
		}
	}
}

// When the job was admitted, had all ranks up and ended, and how long it
// ran, come from its conditions.
func TestTimes(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	cases := map[string]struct {
		conds []metav1.Condition
		now   int
		want  []string
	}{
		"running after Kueue's admission": {
			conds: []metav1.Condition{
				{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobSetCreated", LastTransitionTime: at(1)},
				{Type: "Admitted", Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: at(40)},
				{Type: "Running", Status: metav1.ConditionTrue, Reason: "Running", LastTransitionTime: at(52)},
			},
			now: 100,
			want: []string{
				"Created: 100s ago (2026-01-01T12:00:00Z)",
				"Admitted: 2026-01-01T12:00:40Z (40s after creation)",
				"All ranks up: 2026-01-01T12:00:52Z (12s after it started)",
				"Duration: running for 60s",
			},
		},
		"complete, not queued": {
			conds: []metav1.Condition{
				{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobSetCreated", LastTransitionTime: at(1)},
				{Type: "Running", Status: metav1.ConditionFalse, Reason: "Completed", LastTransitionTime: at(90)},
				{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Completed", LastTransitionTime: at(90)},
			},
			now: 3600,
			want: []string{
				"Created: 60m ago (2026-01-01T12:00:00Z)",
				"Finished: 2026-01-01T12:01:30Z",
				"Duration: ran for 90s",
			},
		},
		"queued: not started": {
			conds: []metav1.Condition{
				{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobSetCreated", LastTransitionTime: at(1)},
				{Type: "Admitted", Status: metav1.ConditionFalse, Reason: "Queued", LastTransitionTime: at(1)},
			},
			now:  30,
			want: []string{"Created: 30s ago (2026-01-01T12:00:00Z)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := failedJob()
			d.Info.TrainJob.Status.Conditions = tc.conds
			d.Pods, d.Events = nil, nil
			var out bytes.Buffer
			if err := write(&out, d, t0.Add(time.Duration(tc.now)*time.Second)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(squash(out.String()), "\n") {
				for _, f := range []string{"Created:", "Admitted:", "Started:", "All ranks up:", "Finished:", "Duration:"} {
					if strings.HasPrefix(l, f) {
						got = append(got, l)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("times (-want,+got):\n%s", diff)
			}
		})
	}
}

// What others wrote on the job, its pods or its events reaches the reader's
// terminal with its control characters made visible.
func TestServerTextEscaped(t *testing.T) {
	d := failedJob()
	d.Info.TrainJob.Annotations[api.AnnotationRerunOf] = "pi-1\x1b]0;owned\x07"
	d.Events[0].Message = "worker-1\rall ranks completed\x1b[2K"
	var out bytes.Buffer
	if err := write(&out, d, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\r\x07") {
		t.Fatalf("control characters reached the output:\n%q", out.String())
	}
	for _, want := range []string{`pi-1^[]0;owned\x07`, `worker-1\rall ranks completed^[[2K`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestProgress(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	running := trainjob.State{Phase: trainjob.PhaseRunning}
	for _, tc := range []struct {
		name   string
		report *trainer.TrainerStatus
		state  trainjob.State
		want   string
	}{
		{name: "no report", state: running},
		{
			name:  "a running job: the time left counted down since the report",
			state: running,
			report: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](600),
				Metrics: []trainer.Metric{{Name: "loss", Value: "0.25"}, {Name: "accuracy", Value: "0.9"}}, LastUpdatedTime: metav1.NewTime(now.Add(-30 * time.Second))},
			want: "42%; about 9m30s left; loss=0.25, accuracy=0.9 (reported 30s ago)",
		},
		{
			name:   "a job that ended: no time left",
			state:  trainjob.State{Phase: trainjob.PhaseComplete},
			report: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100), EstimatedRemainingSeconds: ptr.To[int32](0), LastUpdatedTime: metav1.NewTime(now.Add(-time.Hour))},
			want:   "100% (reported 60m ago)",
		},
		{
			name:   "many metrics: the first few",
			state:  running,
			report: &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}, {Name: "c", Value: "3"}, {Name: "d", Value: "4"}, {Name: "e", Value: "5"}, {Name: "f", Value: "6"}, {Name: "g", Value: "7"}, {Name: "h", Value: "8"}, {Name: "i", Value: "9"}, {Name: "j", Value: "10"}}},
			want:   "a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, and 2 more",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := &trainer.TrainJob{Status: trainer.TrainJobStatus{TrainerStatus: tc.report}}
			if got := progress(tj, tc.state, now); got != tc.want {
				t.Errorf("progress:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
