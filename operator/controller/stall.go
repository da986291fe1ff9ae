package controller

import (
	"context"
	"fmt"
	"io"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// What watching for a stall costs: one pods/log request per running MPI
// job every stallRead at most (every stallReadMin with a short stall
// timeout), for the last stallLogLines lines and at most stallLogBytes of
// its launcher's output, which the API server asks the launcher's kubelet
// for. Never a stream, never a worker's log: the ranks' output reaches the
// launcher through mpirun.
const (
	stallRead     = time.Minute
	stallReadMin  = 10 * time.Second
	stallLogLines = 40
	stallLogBytes = 16 << 10
	// stallQuiet is how long a launcher's output stays quiet after a
	// rank's failure before the job reads as probably stuck: a world
	// whose rank failed for good stops printing at once, while a failed
	// rank's peers may take a collective's timeout to give up too.
	stallQuiet = 5 * time.Minute
	// stallReadTimeout bounds one read: a kubelet that does not answer
	// must not hold a reconcile.
	stallReadTimeout = 10 * time.Second
)

// stallTimes are how long a job's output stays quiet after a failure before
// it reads as stuck, and how often its launcher's output is read: with a
// stall timeout, a stall shows at half of it at the latest.
func stallTimes(timeout time.Duration) (quietAfter, every time.Duration) {
	quietAfter = stallQuiet
	if timeout > 0 && timeout/2 < quietAfter {
		quietAfter = timeout / 2
	}
	return quietAfter, min(max(quietAfter/3, stallReadMin), stallRead)
}

// stallPhase watches a running job for a stall, from the end of its
// launcher's output: output that ended in a rank's failure and stayed quiet
// makes it Stalled (probably stuck), and output quiet for the job's stall
// timeout fails it with reason Stalled; Torus then deletes its JobSet,
// releasing what it holds.
func (r *TrainJobReconciler) stallPhase(ctx context.Context, s *scope) error {
	key := client.ObjectKeyFromObject(s.tj)
	launcher := runningLauncher(s.pods)
	if r.pods == nil || s.job == nil || trainjob.Finished(s.tj) || ptr.Deref(s.tj.Spec.Suspend, false) ||
		!isTrue(s.tj, trainjob.ConditionRunning) || launcher == nil {
		r.memory.launchers.forget(key)
		meta.RemoveStatusCondition(&s.tj.Status.Conditions, trainjob.ConditionStalled)
		return nil
	}
	ready, started := programStart(launcher)
	if !started {
		// The launcher waits for its workers: their images may take
		// longer to pull than any stall timeout, and a scheduling
		// timeout (api.AnnotationSchedulingTimeout), not this one,
		// bounds that wait.
		r.memory.launchers.forget(key)
		meta.RemoveStatusCondition(&s.tj.Status.Conditions, trainjob.ConditionStalled)
		return nil
	}
	quietAfter, every := stallTimes(s.job.StallTimeout)
	s.lookAgain(every)
	read, cached := r.memory.launchers.last(key, launcher.UID, s.now, every)
	if !cached {
		read = r.readLauncher(ctx, s, launcher)
		r.memory.launchers.read(key, read)
	}
	if read.err != nil {
		// A kubelet that cannot serve the log now says nothing of the
		// job: what was said stands until a read succeeds.
		ctrl.LoggerFrom(ctx).V(1).Info("reading the launcher's output", "pod", launcher.Name, "err", read.err)
		return nil
	}
	q := read.quiet
	q.LastOutput = latest(q.LastOutput, ready)
	quiet := s.now.Sub(q.LastOutput)
	if timeout := s.job.StallTimeout; timeout > 0 {
		if quiet < timeout {
			s.lookAgain(timeout - quiet)
		} else if cached {
			// Only a fresh read may fail a job: it may have printed since.
			read = r.readLauncher(ctx, s, launcher)
			r.memory.launchers.read(key, read)
			fresh := read.quiet
			fresh.LastOutput = latest(fresh.LastOutput, ready)
			if read.err == nil && s.now.Sub(fresh.LastOutput) >= timeout {
				r.failStalled(s, fresh, timeout)
			}
			return nil
		} else {
			r.failStalled(s, q, timeout)
			return nil
		}
	}
	if q.Reason == "" || quiet < quietAfter {
		if q.Reason != "" {
			s.lookAgain(quietAfter - quiet)
		}
		meta.RemoveStatusCondition(&s.tj.Status.Conditions, trainjob.ConditionStalled)
		return nil
	}
	msg := fmt.Sprintf("Probably stuck: %s, and the launcher has printed nothing since %s; it printed: %s. "+
		"The other ranks probably wait for it in a collective: %s. %s",
		q.Detail, q.LastOutput.UTC().Format(time.RFC3339), q.Quote(), q.Fix, stallAdvice(s.job.StallTimeout))
	if s.setCondition(trainjob.ConditionStalled, metav1.ConditionTrue, trainjob.ReasonQuietAfterFailure, msg) {
		s.event(corev1.EventTypeWarning, trainjob.ReasonQuietAfterFailure, "%s", msg)
	}
	return nil
}

// stallAdvice is what ends a stuck job.
func stallAdvice(timeout time.Duration) string {
	advice := "With mpi4py, running the program as python -m mpi4py makes a rank's exception abort every rank; delete the job (kubectl mpi delete) to release what it holds"
	if timeout > 0 {
		return advice + fmt.Sprintf(", or it fails when its stall timeout of %s runs out", timeout)
	}
	return advice + ", or give jobs a stall timeout (kubectl mpi run --stall-timeout, annotation " + api.AnnotationStallTimeout + ") to fail them"
}

// failStalled fails a job whose launcher printed nothing for its stall
// timeout; the JobSet goes once the failure is saved (finish).
func (r *TrainJobReconciler) failStalled(s *scope, q diagnosis.Quiet, timeout time.Duration) {
	msg := fmt.Sprintf("The launcher printed nothing for the stall timeout of %s (since %s)", timeout, q.LastOutput.UTC().Format(time.RFC3339))
	if q.Reason != "" {
		msg += fmt.Sprintf(" after %s %s; it printed: %s; %s", q.Reason, q.Detail, q.Quote(), q.Fix)
	}
	msg += fmt.Sprintf(". The job was stopped and its pods deleted, releasing what it held; raise %s if the program may be quiet that long", api.AnnotationStallTimeout)
	s.stopRunning(trainjob.ReasonStalled, msg)
	meta.RemoveStatusCondition(&s.tj.Status.Conditions, trainjob.ConditionStalled)
	if s.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainjob.ReasonStalled, msg) {
		s.event(corev1.EventTypeWarning, trainjob.ReasonStalled, "%s", msg)
		r.metrics.failed(s.tj, trainjob.ReasonStalled, s.now)
	}
	s.stop = true
}

// readLauncher reads the end of the launcher's output, with the kubelet's
// timestamps, bounded in lines and bytes.
func (r *TrainJobReconciler) readLauncher(ctx context.Context, s *scope, launcher *corev1.Pod) launcherRead {
	read := launcherRead{pod: launcher.UID, at: s.now}
	ctx, cancel := context.WithTimeout(ctx, stallReadTimeout)
	defer cancel()
	stream, err := r.pods.Pods(launcher.Namespace).GetLogs(launcher.Name, &corev1.PodLogOptions{
		Container: mpi.TrainerContainer, Timestamps: true,
		TailLines: ptr.To[int64](stallLogLines), LimitBytes: ptr.To[int64](stallLogBytes),
	}).Stream(ctx)
	if err != nil {
		read.err = fmt.Errorf("reading the output of pod %s: %w", launcher.Name, err)
		return read
	}
	defer stream.Close()
	data, err := io.ReadAll(io.LimitReader(stream, stallLogBytes))
	if err != nil {
		read.err = fmt.Errorf("reading the output of pod %s: %w", launcher.Name, err)
		return read
	}
	read.quiet = diagnosis.ReadQuiet(string(data), launcher)
	if read.quiet.LastOutput.IsZero() {
		// Nothing printed yet: quiet since the launcher started.
		read.quiet.LastOutput = containerStart(launcher)
	}
	return read
}

// programStart is when the launcher's program may first be held to its
// silence. A launcher that waits for its workers ahead of its command (the
// launch agent's wait, which reads api.AnnotationWorkersReady) starts its
// program only after Torus has seen them Ready and marked it: until then
// started is false, and from then its output is quiet since the mark at
// the earliest. Any other launcher starts its program with its container.
func programStart(launcher *corev1.Pod) (ready time.Time, started bool) {
	if !waitsForWorkers(launcher) {
		return time.Time{}, true
	}
	v, marked := launcher.Annotations[api.AnnotationWorkersReady]
	if !marked {
		return time.Time{}, false
	}
	// Torus wrote the mark; one it cannot read counts from the container's
	// start, as a launcher that does not wait would.
	ready, _ = time.Parse(time.RFC3339, v)
	return ready, true
}

// latest is the later of two times.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// runningLauncher is the job's running launcher pod, the newest if a
// restart overlaps two.
func runningLauncher(pods []corev1.Pod) *corev1.Pod {
	var out *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Labels[api.LabelRole] != api.RoleLauncher || p.Status.Phase != corev1.PodRunning || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if out == nil || out.CreationTimestamp.Before(&p.CreationTimestamp) {
			out = p
		}
	}
	return out
}

// containerStart is when the launcher's rank container started running.
func containerStart(p *corev1.Pod) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == mpi.TrainerContainer && cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time
		}
	}
	return p.CreationTimestamp.Time
}
