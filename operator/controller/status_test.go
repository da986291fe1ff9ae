package controller

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// The launcher counts as running from its MPI container's start until the
// pod succeeds, including the moment the container has exited 0 and the
// kubelet has not yet marked the pod Succeeded; not while it waits to be
// restarted.
func TestRunningState(t *testing.T) {
	worker := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{api.LabelRole: api.RoleWorker}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	launcher := func(phase corev1.PodPhase, state corev1.ContainerState) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{api.LabelRole: api.RoleLauncher}},
			Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer, State: state}}},
		}
	}
	cases := map[string]struct {
		launcher corev1.Pod
		want     string
	}{
		"running":                         {launcher(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}), trainjob.ReasonRunning},
		"exited 0, pod not yet Succeeded": {launcher(corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}), trainjob.ReasonRunning},
		"succeeded":                       {launcher(corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}), trainjob.ReasonRunning},
		"exited 1, to be restarted":       {launcher(corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}), trainjob.ReasonPending},
		"backing off":                     {launcher(corev1.PodRunning, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}), trainjob.ReasonPending},
		"starting":                        {launcher(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}), trainjob.ReasonPending},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, msg := runningState([]corev1.Pod{worker, tc.launcher}, &mpi.Job{Workers: 1}, nil)
			if got != tc.want {
				t.Errorf("runningState = %s (%s), want %s", got, msg, tc.want)
			}
		})
	}
}

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

// Only a change of conditions' messages and of the replicated jobs'
// counts is progress; any other change of the status is written at once.
func TestProgressOnly(t *testing.T) {
	base := func() *trainer.TrainJobStatus {
		return &trainer.TrainJobStatus{
			Conditions: []metav1.Condition{{Type: trainjob.ConditionRunning, Status: metav1.ConditionFalse, Reason: trainjob.ReasonPending, Message: "3/256 workers ready; launcher waits for all workers"}},
			JobsStatus: []trainer.JobStatus{{Name: mpi.NodeJob, Ready: ptr.To[int32](3)}},
		}
	}
	cases := map[string]struct {
		change func(*trainer.TrainJobStatus)
		want   bool
	}{
		"more workers ready": {func(s *trainer.TrainJobStatus) {
			s.Conditions[0].Message = "4/256 workers ready; launcher waits for all workers"
			s.JobsStatus[0].Ready = ptr.To[int32](4)
		}, true},
		"another reason": {func(s *trainer.TrainJobStatus) {
			s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionTrue, trainjob.ReasonRunning
		}, false},
		"a condition more": {func(s *trainer.TrainJobStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Completed"})
		}, false},
		"a replicated job more": {func(s *trainer.TrainJobStatus) {
			s.JobsStatus = append(s.JobsStatus, trainer.JobStatus{Name: mpi.LauncherJob})
		}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := base()
			tc.change(b)
			if got := progressOnly(base(), b); got != tc.want {
				t.Errorf("progress only: %t, want %t", got, tc.want)
			}
		})
	}
}
