package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// A stall shows at half the stall timeout at the latest, and the launcher's
// output is read a few times within that, never more often than every 10 s
// nor less often than every minute.
func TestStallTimes(t *testing.T) {
	cases := []struct {
		timeout, quietAfter, every time.Duration
	}{
		{0, 5 * time.Minute, time.Minute},
		{time.Minute, 30 * time.Second, 10 * time.Second},
		{4 * time.Minute, 2 * time.Minute, 40 * time.Second},
		{time.Hour, 5 * time.Minute, time.Minute},
	}
	for _, tc := range cases {
		if q, e := stallTimes(tc.timeout); q != tc.quietAfter || e != tc.every {
			t.Errorf("stallTimes(%s) = %s, %s; want %s, %s", tc.timeout, q, e, tc.quietAfter, tc.every)
		}
	}
}

// The launcher read is the running one, the newest while a restart's old
// launcher still goes.
func TestRunningLauncher(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	pod := func(name, role string, phase corev1.PodPhase, created time.Time, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelRole: role}, CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: created.Add(time.Minute)}
		}
		return p
	}
	cases := map[string]struct {
		pods []corev1.Pod
		want string
	}{
		"none":              {pods: []corev1.Pod{pod("w", api.RoleWorker, corev1.PodRunning, t0, false)}},
		"pending":           {pods: []corev1.Pod{pod("l", api.RoleLauncher, corev1.PodPending, t0, false)}},
		"running":           {pods: []corev1.Pod{pod("w", api.RoleWorker, corev1.PodRunning, t0, false), pod("l", api.RoleLauncher, corev1.PodRunning, t0, false)}, want: "l"},
		"the newest of two": {pods: []corev1.Pod{pod("new", api.RoleLauncher, corev1.PodRunning, t0.Add(time.Minute), false), pod("old", api.RoleLauncher, corev1.PodRunning, t0, false)}, want: "new"},
		"not one going":     {pods: []corev1.Pod{pod("old", api.RoleLauncher, corev1.PodRunning, t0, true)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if p := runningLauncher(tc.pods); p != nil {
				got = p.Name
			}
			if got != tc.want {
				t.Errorf("runningLauncher = %q, want %q", got, tc.want)
			}
		})
	}
}

// A launcher that waits for its workers ahead of its command runs no program
// until Torus has marked its workers Ready: its silence counts from the mark.
// A launcher whose wait is an init container, or that has none, starts its
// program with its container.
func TestProgramStart(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	podInfo := []corev1.VolumeMount{{Name: mpi.PodInfoVolume, MountPath: "/etc/podinfo"}}
	launcher := func(waitIn string, mark string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "l", Labels: map[string]string{api.LabelRole: api.RoleLauncher}},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "setup"}},
				Containers:     []corev1.Container{{Name: mpi.TrainerContainer}},
			},
			Status: corev1.PodStatus{
				Phase:                 corev1.PodRunning,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "setup", State: done}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: mpi.TrainerContainer, State: running}},
			},
		}
		switch waitIn {
		case "command":
			p.Spec.Containers[0].VolumeMounts = podInfo
		case "init":
			p.Spec.InitContainers[0].VolumeMounts = podInfo
		}
		if mark != "" {
			p.Annotations = map[string]string{api.AnnotationWorkersReady: mark}
		}
		return p
	}
	cases := map[string]struct {
		pod         *corev1.Pod
		wantReady   time.Time
		wantStarted bool
	}{
		"no wait": {pod: launcher("", ""), wantStarted: true},
		"a wait that ended with its init container": {pod: launcher("init", ""), wantStarted: true},
		"waiting for workers not yet Ready":         {pod: launcher("command", "")},
		"workers marked Ready":                      {pod: launcher("command", t0.Add(3*time.Minute).Format(time.RFC3339)), wantReady: t0.Add(3 * time.Minute), wantStarted: true},
		"a mark Torus cannot read":                  {pod: launcher("command", "soon"), wantStarted: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ready, started := programStart(tc.pod)
			if !ready.Equal(tc.wantReady) || started != tc.wantStarted {
				t.Errorf("programStart = %v, %v; want %v, %v", ready, started, tc.wantReady, tc.wantStarted)
			}
		})
	}
}
