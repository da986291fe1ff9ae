package controller

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// recordRestarts keeps the job's record of its restarts
// (trainjob.ConditionRestarted) up to the JobSet's count: why each run
// stopped, whether the restart spent the budget. The JobSet restarts the
// world by its failure policy (the children package's restartPolicy);
// Torus only says what happened, read from the run's pods while they are
// still there.
func (r *TrainJobReconciler) recordRestarts(s *scope) {
	js := s.jobSet
	key := client.ObjectKeyFromObject(s.tj)
	// The current run's end, as soon as a pod shows it: the pods that
	// show it may be gone when the restart is recorded.
	if f, ok := firstEnd(s, js.Status.Restarts); ok {
		r.memory.runEnds.saw(key, js.Status.Restarts, f)
	}
	if js.Status.Restarts == 0 {
		return
	}
	rec := trainjob.RestartsOf(s.tj)
	seen, countedBefore := rec.Recorded(), rec.Counted
	rec.Total, rec.Counted, rec.Budget = js.Status.Restarts, js.Status.RestartsCountTowardsMax, s.job.MaxRestarts
	if seen >= js.Status.Restarts {
		// The counts alone may have moved (an earlier Torus's record).
		r.setRestarted(s, rec, meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionRestarted).Reason)
		return
	}
	// The JobSet counts the restarts that spent the budget: those of the
	// new ones are told apart when all or none of them did.
	var counted *bool
	switch fresh, spent := js.Status.Restarts-seen, js.Status.RestartsCountTowardsMax-countedBefore; spent {
	case 0:
		counted = ptr.To(false)
	case fresh:
		counted = ptr.To(true)
	}
	for run := seen; run < js.Status.Restarts; run++ {
		x := trainjob.Restart{Run: run, At: s.now, Counted: counted, Cause: causeUnseen}
		if run == js.Status.Restarts-1 {
			seen, ok := r.memory.runEnds.of(key, run)
			x.Cause = runCause(s, run, seen, ok)
		}
		rec.Add(x)
	}
	reason := "Unknown"
	if counted != nil {
		reason = trainjob.ReasonWorldLost
		if *counted {
			reason = trainjob.ReasonProgramFailed
		}
	}
	r.setRestarted(s, rec, reason)
	last := rec.Latest[len(rec.Latest)-1]
	s.event(corev1.EventTypeWarning, trainjob.ReasonRestarting, "Run %d stopped (%s): %s; run %d starts",
		last.Run, countedWord(last.Counted), last.Cause, last.Run+1)
	r.metrics.Restarts.WithLabelValues(s.tj.Namespace, reason).Add(float64(js.Status.Restarts - seen))
}

func (r *TrainJobReconciler) setRestarted(s *scope, rec trainjob.Restarts, reason string) {
	s.setCondition(trainjob.ConditionRestarted, metav1.ConditionTrue, reason, rec.Message())
}

func countedWord(counted *bool) string {
	switch {
	case counted == nil:
		return "restart counted or not: unknown"
	case *counted:
		return "counted against the restart budget"
	}
	return "not counted against the restart budget"
}

// firstEnd is the earliest terminal finding of run's pods, if one shows.
// When every pod is of run, as in most reconciles, that is the status's
// own diagnosis: a large job's pods are neither copied nor read again.
func firstEnd(s *scope, run int32) (diagnosis.Finding, bool) {
	attempt := strconv.Itoa(int(run))
	ofRun := func(p *corev1.Pod) bool { return p.Labels[mpi.LabelJobSetRestartAttempt] == attempt }
	n := 0
	for i := range s.pods {
		if ofRun(&s.pods[i]) {
			n++
		}
	}
	var fs []diagnosis.Finding
	switch {
	case n == len(s.pods) && s.diagnosed:
		fs = s.findings
	default:
		pods := make([]corev1.Pod, 0, n)
		for i := range s.pods {
			if ofRun(&s.pods[i]) {
				pods = append(pods, s.pods[i])
			}
		}
		fs = diagnosis.Pods(pods, s.job.Placement())
	}
	if len(fs) > 0 && fs[0].Terminal {
		return fs[0], true
	}
	return diagnosis.Finding{}, false
}

// runCause says why run stopped: the earliest terminal finding of its
// pods, of those still there and the one seen before (seen, when ok), else
// the problem a pod of the run reported (the Running condition keeps it
// after the pod has gone), else the JobSet's own words.
func runCause(s *scope, run int32, seen diagnosis.Finding, ok bool) string {
	if f, now := firstEnd(s, run); now && (!ok || f.At().Before(seen.At())) {
		seen, ok = f, true
	}
	if ok {
		return seen.Message()
	}
	if c := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionRunning); c != nil && c.Reason == trainjob.ReasonPodProblem {
		return c.Message
	}
	if c := meta.FindStatusCondition(s.jobSet.Status.Conditions, string(jobsetv1alpha2.JobSetRestarting)); c != nil && c.Status == metav1.ConditionTrue {
		return fmt.Sprintf("the JobSet says: %s", c.Message)
	}
	return causeUnseen
}

// causeUnseen is the cause of a run whose end Torus did not see.
const causeUnseen = "Torus did not see why: the run's pods were gone when it looked"

// restarting reports whether the job's new world is starting after a
// restart: the JobSet's Restarting condition holds until every Job of the
// new run is ready.
func restarting(js *jobsetv1alpha2.JobSet) bool {
	return js.Status.Restarts > 0 && jobSetCondition(js, jobsetv1alpha2.JobSetRestarting)
}
