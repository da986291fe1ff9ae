package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// ungateParallelism bounds the pods ungated at once: the client's own rate
// limit spaces the requests, this only keeps several in flight.
const ungateParallelism = 8

// ungatePods lets the job's pods be scheduled once this run's keys are
// Torus's own (api.SchedulingGateSSHKeys). Only pods of the job's own Jobs
// are touched (s.pods), and each patch names the pod's UID, so a pod
// replaced meanwhile under the same name keeps its gate until it is seen.
func (r *TrainJobReconciler) ungatePods(ctx context.Context, s *scope) error {
	if !s.keysReady {
		return nil
	}
	var gated []*corev1.Pod
	for i := range s.pods {
		if p := &s.pods[i]; p.DeletionTimestamp.IsZero() && hasGate(p, api.SchedulingGateSSHKeys) {
			gated = append(gated, p)
		}
	}
	if len(gated) == 0 {
		return nil
	}
	if hold := restartHold(s); hold > 0 {
		ctrl.LoggerFrom(ctx).V(2).Info("Holding the new run's pods: restart back-off", "for", hold)
		s.lookAgain(hold)
		return nil
	}
	if behind, err := r.reservationBehind(ctx, s); err != nil || behind {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(ungateParallelism)
	for _, p := range gated {
		g.Go(func() error { return r.ungate(ctx, p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Ungated pods: SSH keys are made", "pods", len(gated))
	return nil
}

// ungate removes Torus's gate from one pod, leaving any other gate (Kueue's
// topology gate, a user's) to its owner.
func (r *TrainJobReconciler) ungate(ctx context.Context, p *corev1.Pod) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": p.UID},
		"spec": map[string]any{"schedulingGates": []map[string]string{
			{"name": api.SchedulingGateSSHKeys, "$patch": "delete"},
		}},
	})
	if err != nil {
		return fmt.Errorf("encoding the patch that ungates pod %s: %w", p.Name, err)
	}
	return r.patchPod(ctx, p, types.StrategicMergePatchType, patch, "ungating")
}

// patchPod sends a patch that names the pod's UID: a pod gone, or replaced
// meanwhile under the same name (a UID that does not match is refused as
// Invalid), is left to the next reconcile, which reads it.
func (r *TrainJobReconciler) patchPod(ctx context.Context, p *corev1.Pod, pt types.PatchType, patch []byte, doing string) error {
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	switch err := r.client.Patch(ctx, target, client.RawPatch(pt, patch)); {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
		return nil
	case err != nil:
		return fmt.Errorf("%s pod %s: %w", doing, p.Name, err)
	}
	return nil
}

// keysMade reports whether the job's current run has keys Torus made, from
// the cache and without writing: for a job tracked as it started (frozen),
// whose children the reconcile leaves alone, but whose pods a JobSet
// restart or Kueue's readmission may still bring behind the gate.
func (r *TrainJobReconciler) keysMade(ctx context.Context, s *scope) bool {
	if s.jobSet == nil {
		return false
	}
	var secret corev1.Secret
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: mpi.SSHSecretName(s.tj.Name)}, &secret); err != nil {
		return false
	}
	if !r.proofs.made(childSecret, &secret, s.tj) {
		return false
	}
	made, err := strconv.Atoi(secret.Annotations[api.AnnotationJobSetRestarts])
	return err == nil && int32(made) >= s.jobSet.Status.Restarts
}

// restartHold is how much longer the current run's pods stay behind the
// gate after a restart: a run that follows restarts not the program's
// backs off (trainjob.Restarts.Backoff), counted from the restart. A
// restart the record has not taken in yet (statusPhase, later in this
// reconcile) is weighed as it will be, from now: not counted unless the
// JobSet counted one more.
func restartHold(s *scope) time.Duration {
	js := s.jobSet
	if js == nil || js.Status.Restarts == 0 {
		return 0
	}
	rec := trainjob.RestartsOf(s.tj)
	if seen := rec.Recorded(); seen < js.Status.Restarts {
		counted := js.Status.RestartsCountTowardsMax > rec.Counted
		for run := seen; run < js.Status.Restarts; run++ {
			rec.Latest = append(rec.Latest, trainjob.Restart{Run: run, At: s.now, Counted: &counted})
		}
	}
	wait, _ := rec.Backoff()
	last, ok := rec.LatestRestart()
	if !ok {
		return 0
	}
	return last.At.Add(wait).Sub(s.now)
}

// restartHoldOutsideKueue is restartHold for a job Kueue does not queue:
// with no gate on its pods, its JobSet waits suspended by Torus until the
// back-off ends (willRun), its new run's pods deleted, and Torus resumes
// it then. A queued job's JobSet is Kueue's to suspend; its pods wait
// behind the gate instead.
func (s *scope) restartHoldOutsideKueue(queued bool) time.Duration {
	if queued || s.jobSet == nil {
		return 0
	}
	return max(restartHold(s), 0)
}

func hasGate(p *corev1.Pod, name string) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == name })
}
