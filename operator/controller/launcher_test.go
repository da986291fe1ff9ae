package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// TestWaitsForWorkers: a launcher waits while the container that reads the
// workers-ready mark runs, whether that is an init container or, ahead of
// its command, the launcher's own.
func TestWaitsForWorkers(t *testing.T) {
	reads := []corev1.VolumeMount{{Name: mpi.PodInfoVolume, MountPath: mpi.PodInfoMountPath}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
	pod := func(initMounts, mainMounts []corev1.VolumeMount, initState, mainState corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: mpi.SSHInitContainer, VolumeMounts: initMounts}},
				Containers:     []corev1.Container{{Name: mpi.TrainerContainer, VolumeMounts: mainMounts}},
			},
			Status: corev1.PodStatus{
				InitContainerStatuses: []corev1.ContainerStatus{{Name: mpi.SSHInitContainer, State: initState}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: mpi.TrainerContainer, State: mainState}},
			},
		}
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"the init container that waits runs":              {pod(reads, nil, running, waiting), true},
		"the init container that waited has ended":        {pod(reads, nil, done, running), false},
		"the launcher's own container waits, not started": {pod(nil, reads, running, waiting), false},
		"the launcher's own container waits and runs":     {pod(nil, reads, done, running), true},
		"the launcher's own container has ended":          {pod(nil, reads, done, done), false},
		"no container reads the mark":                     {pod(nil, nil, done, running), false},
		"no status yet":                                   {&corev1.Pod{Spec: pod(nil, reads, done, running).Spec}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := waitsForWorkers(tc.pod); got != tc.want {
				t.Errorf("waitsForWorkers = %t, want %t", got, tc.want)
			}
		})
	}
}
