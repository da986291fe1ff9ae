package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// setCondition sets a condition and queues an event when it changes status
// or reason. It returns whether the condition transitioned.
func (s *scope) setCondition(typ string, status metav1.ConditionStatus, reason, msg string) bool {
	old := meta.FindStatusCondition(s.tj.Status.Conditions, typ)
	changed := old == nil || old.Status != status || old.Reason != reason
	meta.SetStatusCondition(&s.tj.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg),
		ObservedGeneration: s.tj.Generation,
	})
	return changed
}

// stopRunning sets Running=False as a job ends. The condition's transition
// time then moves to the end, so its message keeps since when all the ranks
// had run: with the admission's and the end's transition times, the moments
// users ask about stay on the job.
func (s *scope) stopRunning(reason, msg string) {
	if c := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionRunning); c != nil && c.Status == metav1.ConditionTrue {
		msg = fmt.Sprintf("%s (all ranks had run since %s)", msg, c.LastTransitionTime.UTC().Format(time.RFC3339))
	}
	s.setCondition(trainjob.ConditionRunning, metav1.ConditionFalse, reason, msg)
}

func isTrue(tj *trainer.TrainJob, typ string) bool {
	return meta.IsStatusConditionTrue(tj.Status.Conditions, typ)
}

// syncStatus derives the TrainJob's status from its JobSet and pods.
func (r *TrainJobReconciler) syncStatus(s *scope) {
	tj, js := s.tj, s.jobSet
	if js == nil {
		return
	}
	// Suspended follows the TrainJob's spec; activeDeadlineSeconds counts
	// from its last transition.
	suspended := ptr.Deref(tj.Spec.Suspend, false)
	if suspended {
		if s.setCondition(trainer.TrainJobSuspended, metav1.ConditionTrue, trainjob.ReasonSuspended, "TrainJob is suspended; its pods are removed and its SSH keys deleted until it resumes") {
			s.event(corev1.EventTypeNormal, trainjob.ReasonSuspended, "Suspended")
		}
	} else if meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended) != nil {
		if s.setCondition(trainer.TrainJobSuspended, metav1.ConditionFalse, trainjob.ReasonResumed, "TrainJob is resumed") {
			s.event(corev1.EventTypeNormal, trainjob.ReasonResumed, "Resumed")
		}
	}
	if !jobSetObserved(js) {
		// The JobSet controller writes the JobSet's first status moments
		// after it exists, and its watch event brings the job back:
		// reporting then takes one status write instead of two, and
		// Created=True also says the JobSet controller took the job up.
		// A status patch is the costliest request Torus makes of a job.
		r.awaitJobSetReport(s)
		return
	}
	placement := s.job.Placement()
	if s.setCondition(trainjob.ConditionCreated, metav1.ConditionTrue, trainjob.ReasonJobSetCreated,
		fmt.Sprintf("JobSet %s: launcher and %d workers, %d slots each (%s)", js.Name, s.job.Workers, s.job.SlotsPerHost, s.job.Implementation)) {
		// The first run's keys are announced here rather than with an event
		// of their own (ensureSSHSecret), one Event write per job less.
		s.event(corev1.EventTypeNormal, trainjob.ReasonJobSetCreated,
			"Created JobSet %s with a launcher and %d workers; its SSH keys are in Secret %s while it runs",
			js.Name, s.job.Workers, mpi.SSHSecretName(tj.Name))
		r.metrics.Created.WithLabelValues(tj.Namespace).Inc()
	}

	tj.Status.JobsStatus = jobsStatus(js)
	findings := diagnosis.Pods(s.pods, placement)
	s.findings, s.diagnosed = findings, true
	// A pod that failed for good explains more than pods never created;
	// those explain more than pods still starting.
	terminal := 0
	for terminal < len(findings) && findings[terminal].Terminal {
		terminal++
	}
	findings = slices.Concat(findings[:terminal], s.refused, s.sandboxes, findings[terminal:])
	r.recordRestarts(s)

	switch {
	case jobSetCondition(js, jobsetv1alpha2.JobSetCompleted):
		s.stopRunning(trainjob.ReasonCompleted, "The launcher completed")
		if s.setCondition(trainer.TrainJobComplete, metav1.ConditionTrue, trainjob.ReasonCompleted, "The launcher completed") {
			s.event(corev1.EventTypeNormal, trainjob.ReasonCompleted, "Completed")
			r.metrics.succeeded(tj, s.now)
		}
	case jobSetCondition(js, jobsetv1alpha2.JobSetFailed):
		msg := failureMessage(js, findings, meta.FindStatusCondition(tj.Status.Conditions, trainjob.ConditionRunning))
		if rec := trainjob.RestartsOf(tj); rec.Stops() > 0 {
			// Said first, where a truncated message keeps it; every
			// run's end is on the Restarted condition.
			msg = fmt.Sprintf("After %s (kubectl mpi describe %s says why each run stopped): %s", rec.Summary(), tj.Name, msg)
		}
		s.stopRunning(trainjob.ReasonFailed, msg)
		if s.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainjob.ReasonFailed, msg) {
			s.event(corev1.EventTypeWarning, trainjob.ReasonFailed, "%s", msg)
			// The metric counts failures by their cause (OOMKilled,
			// SSHConnectionRefused, ...): a bounded set, from diagnosis.
			cause := trainjob.ReasonFailed
			if len(findings) > 0 {
				cause = findings[0].Reason
			}
			r.metrics.failed(tj, cause, s.now)
		}
	case s.waiting != "":
		s.setCondition(trainjob.ConditionRunning, metav1.ConditionFalse, trainjob.ReasonQueued, s.waiting)
	case !suspended && ptr.Deref(js.Spec.Suspend, false) && isTrue(tj, trainjob.ConditionAdmitted):
		// The moment between Kueue's admission and its resuming the JobSet.
		s.setCondition(trainjob.ConditionRunning, metav1.ConditionFalse, trainjob.ReasonPending, "Admitted by Kueue; the pods are starting")
	case !suspended && s.restartHoldOutsideKueue(r.build.Queued(tj)) > 0:
		// Torus holds the JobSet suspended for the back-off.
		s.setRestarting(js)
	case suspended || ptr.Deref(js.Spec.Suspend, false):
		s.setCondition(trainjob.ConditionRunning, metav1.ConditionFalse, trainjob.ReasonSuspended, "The job is suspended")
	case restarting(js):
		s.setRestarting(js)
	default:
		reason, msg := runningState(s.pods, s.job, findings)
		if prev := meta.FindStatusCondition(tj.Status.Conditions, trainjob.ConditionRunning); prev != nil &&
			prev.Reason == trainjob.ReasonPodProblem && reason == trainjob.ReasonPending && podsMissing(s.pods, s.job) {
			// The pod that reported the problem is gone (the Job
			// controller deletes the pods of a Job that ran out of
			// restarts, moments before it fails): its word stands until
			// another pod's replaces it, so that the job's failure can
			// name it.
			break
		}
		if reason == trainjob.ReasonRunning {
			if js.Status.Restarts > 0 {
				msg += fmt.Sprintf(" (run %d)", js.Status.Restarts)
			}
			if s.setCondition(trainjob.ConditionRunning, metav1.ConditionTrue, trainjob.ReasonRunning, msg) {
				s.event(corev1.EventTypeNormal, trainjob.ReasonRunning, "%s", msg)
				// A job counts once, by its first run.
				if js.Status.Restarts == 0 {
					r.metrics.Running.WithLabelValues(tj.Namespace).Inc()
					r.metrics.TimeToRunning.WithLabelValues(tj.Namespace).Observe(s.now.Sub(tj.CreationTimestamp.Time).Seconds())
				}
			}
		} else {
			s.setCondition(trainjob.ConditionRunning, metav1.ConditionFalse, reason, msg)
		}
	}
}

// awaitJobSetReport handles a JobSet its controller has not reported on
// yet. A Created=False left from before the JobSet existed becomes Unknown,
// and past the report timeout Created=Unknown says what to check: a JobSet
// controller that is missing, or fails on the JobSet (it writes no status
// when its reconcile errs), would otherwise leave the job without a word.
func (r *TrainJobReconciler) awaitJobSetReport(s *scope) {
	js := s.jobSet
	waited := s.now.Sub(js.CreationTimestamp.Time)
	if waited < r.jobSetReportTimeout {
		if c := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionCreated); c != nil && c.Status == metav1.ConditionFalse {
			s.setCondition(trainjob.ConditionCreated, metav1.ConditionUnknown, trainjob.ReasonJobSetPending,
				fmt.Sprintf("Created JobSet %s; waiting for the JobSet controller to start it", js.Name))
		}
		s.lookAgain(r.jobSetReportTimeout - waited)
		return
	}
	if last := r.jobSetReports.last(); last.After(js.CreationTimestamp.Time) && s.now.Sub(last) < r.jobSetReportTimeout {
		// The controller has reported on other JobSets since this one was
		// made, within the timeout: it runs, one JobSet at a time, and has
		// not come to this one yet. Were it to stop, this job says so a
		// report timeout after its last report.
		s.setCondition(trainjob.ConditionCreated, metav1.ConditionUnknown, trainjob.ReasonJobSetPending,
			fmt.Sprintf("Created JobSet %s; the JobSet controller is busy with other JobSets and has not started this one in %s. If this lasts, see the JobSet's events (kubectl describe jobset %s -n %s)",
				js.Name, r.jobSetReportTimeout, js.Name, js.Namespace))
		s.lookAgain(r.jobSetReportTimeout - s.now.Sub(last))
		return
	}
	msg := fmt.Sprintf("JobSet %s exists, but the JobSet controller has not reported on it in %s: check that it runs (kubectl mpi doctor) and the JobSet's events (kubectl describe jobset %s -n %s)",
		js.Name, r.jobSetReportTimeout, js.Name, js.Namespace)
	if s.setCondition(trainjob.ConditionCreated, metav1.ConditionUnknown, trainjob.ReasonJobSetNotReported, msg) {
		s.event(corev1.EventTypeWarning, trainjob.ReasonJobSetNotReported, "%s", msg)
	}
}

// reportClock holds the time of the latest report seen.
type reportClock struct{ unixNano atomic.Int64 }

func (c *reportClock) saw(t time.Time) {
	for {
		old := c.unixNano.Load()
		if t.UnixNano() <= old || c.unixNano.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

func (c *reportClock) last() time.Time {
	if n := c.unixNano.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// jobSetReported records when the JobSet controller reports on a JobSet
// Torus made (a change of its status, which only that controller writes),
// for jobs whose JobSet it has not come to yet (awaitJobSetReport). It
// filters nothing.
func (r *TrainJobReconciler) jobSetReported() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*jobsetv1alpha2.JobSet)
		js, ok := e.ObjectNew.(*jobsetv1alpha2.JobSet)
		if ok && okOld && js.Annotations[api.AnnotationJob] != "" && !equality.Semantic.DeepEqual(old.Status, js.Status) {
			r.jobSetReports.saw(r.clock.Now())
		}
		return true
	}}
}

// jobSetObserved reports whether the JobSet controller has reconciled the
// JobSet: its first reconcile records a status for every replicated job, or
// a condition such as Suspended.
func jobSetObserved(js *jobsetv1alpha2.JobSet) bool {
	return len(js.Status.ReplicatedJobsStatus) > 0 || len(js.Status.Conditions) > 0
}

func jobSetCondition(js *jobsetv1alpha2.JobSet, typ jobsetv1alpha2.JobSetConditionType) bool {
	return meta.IsStatusConditionTrue(js.Status.Conditions, string(typ))
}

func jobsStatus(js *jobsetv1alpha2.JobSet) []trainer.JobStatus {
	if len(js.Status.ReplicatedJobsStatus) == 0 {
		return nil
	}
	out := make([]trainer.JobStatus, 0, len(js.Status.ReplicatedJobsStatus))
	for _, rj := range js.Status.ReplicatedJobsStatus {
		out = append(out, trainer.JobStatus{
			Name: rj.Name, Ready: ptr.To(rj.Ready), Succeeded: ptr.To(rj.Succeeded),
			Failed: ptr.To(rj.Failed), Active: ptr.To(rj.Active), Suspended: ptr.To(rj.Suspended),
		})
	}
	return out
}

// runningState gives ReasonRunning when the launcher and every worker are
// up, ReasonPodProblem when a pod says why it is not, else ReasonPending;
// the message counts them, or says what holds them back.
func runningState(pods []corev1.Pod, job *mpi.Job, findings []diagnosis.Finding) (reason, msg string) {
	var launcherUp bool
	var workersReady int32
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		switch p.Labels[api.LabelRole] {
		case api.RoleLauncher:
			launcherUp = launcherUp || p.Status.Phase == corev1.PodSucceeded || launcherRuns(p)
		case api.RoleWorker:
			if podReady(p) {
				workersReady++
			}
		}
	}
	counts := fmt.Sprintf("%d/%d workers ready", workersReady, job.Workers)
	if launcherUp && workersReady >= job.Workers {
		return trainjob.ReasonRunning, "Launcher running, " + counts
	}
	if len(findings) > 0 {
		return trainjob.ReasonPodProblem, findings[0].Message()
	}
	if workersReady >= job.Workers {
		return trainjob.ReasonPending, counts + "; launcher starting"
	}
	return trainjob.ReasonPending, counts + "; launcher waits for all workers"
}

// podsMissing reports whether the launcher or a worker has no live pod.
func podsMissing(pods []corev1.Pod, job *mpi.Job) bool {
	var launchers, workers int32
	for i := range pods {
		if !pods[i].DeletionTimestamp.IsZero() {
			continue
		}
		switch pods[i].Labels[api.LabelRole] {
		case api.RoleLauncher:
			launchers++
		case api.RoleWorker:
			workers++
		}
	}
	return launchers == 0 || workers < job.Workers
}

// launcherRuns reports whether the launcher's MPI container runs, or ran
// to success in a pod the kubelet has not marked Succeeded yet. A pod in
// phase Running whose container failed or waits to be restarted (a crash
// loop under restartPolicy OnFailure) is not running the job.
func launcherRuns(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != mpi.TrainerContainer {
			continue
		}
		if t := cs.State.Terminated; t != nil {
			return t.ExitCode == 0
		}
		return cs.State.Running != nil
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// failureMessage names the first failing rank range and why, or falls back
// on JobSet's own words.
func failureMessage(js *jobsetv1alpha2.JobSet, findings []diagnosis.Finding, running *metav1.Condition) string {
	if len(findings) > 0 {
		msg := findings[0].Message()
		if more := len(findings) - 1; more > 0 {
			msg += fmt.Sprintf(" (and %d more pods failed after it)", more)
		}
		return msg
	}
	msg := "JobSet failed"
	if c := meta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed)); c != nil {
		msg = strings.TrimSpace("JobSet failed: " + c.Message)
	}
	if running != nil && running.Reason == trainjob.ReasonPodProblem {
		// The pods are gone (the Job controller deletes those it
		// restarted under restartPolicy OnFailure once their backoff
		// limit is reached); the last problem a pod reported is the cause.
		return running.Message + "; then " + msg
	}
	return msg
}

// maxConditionMessage is the API's limit on metav1.Condition messages.
const maxConditionMessage = 32768

func truncate(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	const ellipsis = "..."
	return msg[:maxConditionMessage-len(ellipsis)] + ellipsis
}

// setRestarting says the job starts a new run after a restart: its new
// run's pods are starting, or wait for the restart back-off, while the
// old run's may still be going. The latest cause stands until the new
// world runs.
func (s *scope) setRestarting(js *jobsetv1alpha2.JobSet) {
	rec := trainjob.RestartsOf(s.tj)
	cause := "the previous run stopped"
	last, ok := rec.LatestRestart()
	if ok {
		cause = fmt.Sprintf("run %d stopped: %s", last.Run, last.Cause)
	}
	resumes := "which starts the program again: the job keeps no checkpoints (--checkpoint-volume)"
	if c := s.job.Checkpoint; c != nil {
		resumes = "which resumes from the program's last checkpoint in " + c.Claim
	}
	backoff := ""
	if wait, streak := rec.Backoff(); wait > 0 && ok {
		backoff = fmt.Sprintf(". The new run waits until %s: %d restarts in a row were not the program's, and each waits twice as long as the one before, up to %s",
			last.At.Add(wait).UTC().Format(time.RFC3339), streak, trainjob.RestartBackoffMax)
	}
	s.setCondition(trainjob.ConditionRunning, metav1.ConditionFalse, trainjob.ReasonRestarting,
		fmt.Sprintf("Starting run %d, %s; %s%s%s", js.Status.Restarts, resumes, cause, backoff, s.oldRunWait(js.Status.Restarts)))
}

// maxNamedOldPods bounds the old run's pods a Restarting message names.
const maxNamedOldPods = 3

// oldRunWait says which pods of earlier runs the new run waits for: the
// JobSet makes the new run's Jobs only once the old ones, and their pods,
// are gone. A pod whose grace period has ended without its kubelet
// confirming that it stopped is on a node that is down or cut off, and
// Kubernetes keeps it until the node returns or is deleted or tainted out
// of service: the message says so, and how, once that moment passes.
func (s *scope) oldRunWait(run int32) string {
	var old []*corev1.Pod
	for i := range s.pods {
		p := &s.pods[i]
		if attempt, err := strconv.Atoi(p.Labels[mpi.LabelJobSetRestartAttempt]); err == nil && attempt < int(run) {
			old = append(old, p)
		}
	}
	if len(old) == 0 {
		return ""
	}
	// By name, so that the message names the same pods each time.
	slices.SortFunc(old, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var overdue *corev1.Pod
	for _, p := range old {
		// The API server sets a deleted pod's deletionTimestamp to the
		// end of its grace period.
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if d := p.DeletionTimestamp; d != nil && p.Spec.NodeName != "" && !terminal {
			if !s.now.Before(d.Time) {
				if overdue == nil {
					overdue = p
				}
			} else {
				s.lookAgain(d.Sub(s.now) + time.Second)
			}
		}
	}
	var named []string
	for _, p := range old[:min(len(old), maxNamedOldPods)] {
		where := ""
		if p.Spec.NodeName != "" {
			where = " on " + p.Spec.NodeName
		}
		named = append(named, p.Name+where)
	}
	if more := len(old) - len(named); more > 0 {
		named = append(named, fmt.Sprintf("%d more", more))
	}
	msg := fmt.Sprintf(". It waits for the earlier run's pods to go: %s", strings.Join(named, ", "))
	if overdue != nil {
		node := overdue.Spec.NodeName
		msg += fmt.Sprintf("; %s's node has not confirmed that it stopped by the end of its grace period: if %s is down, Kubernetes lets the pod go once the Node is deleted or tainted out of service (kubectl taint node %s node.kubernetes.io/out-of-service=nodeshutdown:NoExecute)",
			overdue.Name, node, node)
	}
	return msg
}
