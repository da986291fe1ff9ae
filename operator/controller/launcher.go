package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// markWorkersReady tells a launcher that waits for its workers that Torus
// has seen every worker of its run Ready (api.AnnotationWorkersReady),
// which the launcher reads through its downward API volume: from then its
// wait is bounded. The kubelet's readiness is the one thing the launcher
// cannot see, and without it a worker refusing connections may be one
// still pulling its image or one the network keeps from the launcher. A
// launcher that has stopped waiting is left alone: the mark costs a write
// only when it can matter.
func (r *TrainJobReconciler) markWorkersReady(ctx context.Context, s *scope) error {
	if s.job == nil {
		return nil
	}
	ready := map[string]int32{}
	var waiting []*corev1.Pod
	for i := range s.pods {
		p := &s.pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		switch p.Labels[api.LabelRole] {
		case api.RoleWorker:
			if podReady(p) {
				ready[p.Labels[mpi.LabelJobSetRestartAttempt]]++
			}
		case api.RoleLauncher:
			if _, marked := p.Annotations[api.AnnotationWorkersReady]; !marked && waitsForWorkers(p) {
				waiting = append(waiting, p)
			}
		}
	}
	for _, p := range waiting {
		if ready[p.Labels[mpi.LabelJobSetRestartAttempt]] < s.job.Workers {
			continue
		}
		if err := r.mark(ctx, p, s.now); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Told the launcher its workers are Ready", "pod", p.Name)
	}
	return nil
}

// waitsForWorkers reports whether a launcher's wait for its workers runs:
// the container that mounts the pod-info volume is running. An init
// container's wait ends with it; the wait ahead of the launcher's command
// (mpi.LaunchWaitCommand) cannot be seen to end, so such a launcher is
// marked while it runs: one write per run.
func waitsForWorkers(p *corev1.Pod) bool {
	for _, set := range []struct {
		specs    []corev1.Container
		statuses []corev1.ContainerStatus
	}{{p.Spec.InitContainers, p.Status.InitContainerStatuses}, {p.Spec.Containers, p.Status.ContainerStatuses}} {
		for _, c := range set.specs {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == mpi.PodInfoVolume }) {
				continue
			}
			for _, st := range set.statuses {
				if st.Name == c.Name {
					return st.State.Running != nil
				}
			}
			return false
		}
	}
	return false
}

// mark writes the workers-ready annotation on one launcher pod, naming its
// UID so that a pod replaced meanwhile under the same name is not marked.
func (r *TrainJobReconciler) mark(ctx context.Context, p *corev1.Pod, now time.Time) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         p.UID,
		"annotations": map[string]string{api.AnnotationWorkersReady: now.UTC().Format(time.RFC3339)},
	}})
	if err != nil {
		return fmt.Errorf("encoding the patch that marks pod %s: %w", p.Name, err)
	}
	return r.patchPod(ctx, p, types.MergePatchType, patch, "marking")
}
