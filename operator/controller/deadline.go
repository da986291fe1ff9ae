package controller

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// deadlineWarnFraction is how much of activeDeadlineSeconds passes before
// Torus warns that the job will be stopped.
const deadlineWarnFraction = 0.8

// deadlinePhase enforces spec.activeDeadlineSeconds: a job past its
// deadline is failed and stops here; one before it looks again when its
// warning or its deadline is due.
func (r *TrainJobReconciler) deadlinePhase(_ context.Context, s *scope) error {
	ads := s.tj.Spec.ActiveDeadlineSeconds
	if ads <= 0 || ptr.Deref(s.tj.Spec.Suspend, false) {
		return nil
	}
	start, queued := trainjob.LastStart(s.tj, r.kueue.Load() && r.build.Queued(s.tj))
	if queued {
		// The admission's status write brings the job back.
		return nil
	}
	limit := time.Duration(ads) * time.Second
	deadline := start.Add(limit)
	if !s.now.Before(deadline) {
		msg := fmt.Sprintf("The job ran for activeDeadlineSeconds=%d since it last started (%s) and was stopped; raise spec.activeDeadlineSeconds if it needs longer",
			ads, start.UTC().Format(time.RFC3339))
		s.stopRunning(trainjob.ReasonDeadlineExceeded, msg)
		if s.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainjob.ReasonDeadlineExceeded, msg) {
			s.event(corev1.EventTypeWarning, trainjob.ReasonDeadlineExceeded, "%s", msg)
			r.metrics.failed(s.tj, trainjob.ReasonDeadlineExceeded, s.now)
		}
		// The JobSet goes once the failure is saved (finish).
		s.stop = true
		return nil
	}
	warnAt := start.Add(time.Duration(float64(limit) * deadlineWarnFraction))
	if s.now.Before(warnAt) {
		s.lookAgain(warnAt.Sub(s.now))
		return nil
	}
	// One warning a run: a job resumed from suspension starts a new one.
	run := fmt.Sprintf("%s/%d", s.tj.UID, start.Unix())
	if r.memory.deadlines.warn(client.ObjectKeyFromObject(s.tj), run) {
		s.event(corev1.EventTypeWarning, trainjob.ReasonDeadlineApproaching,
			"The job will be stopped at %s, when activeDeadlineSeconds=%d runs out", deadline.UTC().Format(time.RFC3339), ads)
	}
	s.lookAgain(deadline.Sub(s.now))
	return nil
}

// checkSchedulingTimeout fails a job whose ranks have not all run within
// its scheduling timeout (api.AnnotationSchedulingTimeout) since it last
// started, the clock of activeDeadlineSeconds: Kueue's queueing does not
// count. Its message names what the job waited for, in the words of
// whatever decided it (Running=False's). The JobSet goes once the failure is
// saved (finish), which releases its quota. It returns when to look again.
func (r *TrainJobReconciler) checkSchedulingTimeout(s *scope) time.Duration {
	timeout := s.job.SchedulingTimeout
	if timeout <= 0 || ptr.Deref(s.tj.Spec.Suspend, false) {
		return 0
	}
	running := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionRunning)
	// Only the wait for the first time all ranks run: a job that ran is
	// watched by its failure policy, and Kueue's queue is Kueue's.
	if running != nil && (running.Status == metav1.ConditionTrue || running.Reason != trainjob.ReasonPending && running.Reason != trainjob.ReasonPodProblem) {
		return 0
	}
	start, queued := trainjob.LastStart(s.tj, r.kueue.Load() && r.build.Queued(s.tj))
	if queued {
		return 0
	}
	limit := start.Add(timeout)
	if s.now.Before(limit) {
		return limit.Sub(s.now)
	}
	waited := "the JobSet controller to start the job"
	if running != nil {
		waited = running.Message
	}
	msg := fmt.Sprintf("Not all ranks ran within the scheduling timeout of %s since the job started (%s); it waited for: %s. "+
		"The job was stopped and its pods deleted, releasing what it held; fix what it waited for, or raise %s",
		timeout, start.UTC().Format(time.RFC3339), waited, api.AnnotationSchedulingTimeout)
	s.setCondition(trainjob.ConditionRunning, metav1.ConditionFalse, trainjob.ReasonSchedulingTimeout, msg)
	if s.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainjob.ReasonSchedulingTimeout, msg) {
		s.event(corev1.EventTypeWarning, trainjob.ReasonSchedulingTimeout, "%s", msg)
		r.metrics.failed(s.tj, trainjob.ReasonSchedulingTimeout, s.now)
	}
	return 0
}
