package children

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// RuleDisrupted is the JobSet failure policy rule by which a job whose pod
// was disrupted (evicted, preempted, lost with its node) starts again
// without spending its restart budget.
const RuleDisrupted = "TorusPodDisrupted"

// restartPolicy is the job's in the JobSet's own terms. An MPI world cannot
// take a replacement for one of its ranks, so a failed Job restarts the
// whole JobSet, and BlockingRecreate (unless the runtime chose another
// strategy) removes every pod of the run before the next run's start. A Job
// that failed because a pod was disrupted (failOnDisruption) restarts it
// without counting against maxRestarts; any other failure, the program's,
// counts, and the job fails once the budget is spent. A runtime's own rules
// come after Torus's.
func restartPolicy(js *jobsetv1alpha2.JobSet, job *mpi.Job) {
	fp := js.Spec.FailurePolicy
	if fp == nil {
		fp = &jobsetv1alpha2.FailurePolicy{}
	}
	fp.MaxRestarts = job.MaxRestarts
	if fp.RestartStrategy == "" {
		fp.RestartStrategy = jobsetv1alpha2.BlockingRecreate
	}
	rules := slices.DeleteFunc(slices.Clone(fp.Rules), func(r jobsetv1alpha2.FailurePolicyRule) bool { return r.Name == RuleDisrupted })
	fp.Rules = append([]jobsetv1alpha2.FailurePolicyRule{{
		Name:                        RuleDisrupted,
		Action:                      jobsetv1alpha2.RestartJobSetAndIgnoreMaxRestarts,
		OnJobFailureReasons:         []string{batchv1.JobReasonPodFailurePolicy},
		OnJobFailureMessagePatterns: []string{string(corev1.DisruptionTarget)},
	}}, rules...)
	js.Spec.FailurePolicy = fp
}

// failOnDisruption fails a Job at once, with reason PodFailurePolicy and a
// message naming DisruptionTarget, when one of its pods is disrupted: the
// API server's eviction, the scheduler's preemption, the taint manager and
// the pod garbage collector (a lost node) mark the pods they stop so. The
// JobSet's rule (restartPolicy) then tells it from the program's failure.
// The Job API allows a pod failure policy only for pods that are never
// restarted in place.
func failOnDisruption(spec *batchv1.JobSpec) {
	if spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return
	}
	if spec.PodFailurePolicy == nil {
		spec.PodFailurePolicy = &batchv1.PodFailurePolicy{}
	}
	rule := batchv1.PodFailurePolicyRule{
		Action:          batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}
	if len(spec.PodFailurePolicy.Rules) > 0 && ruleEqual(spec.PodFailurePolicy.Rules[0], rule) {
		return
	}
	spec.PodFailurePolicy.Rules = append([]batchv1.PodFailurePolicyRule{rule}, spec.PodFailurePolicy.Rules...)
}

func ruleEqual(a, b batchv1.PodFailurePolicyRule) bool {
	return a.Action == b.Action && a.OnExitCodes == nil && slices.EqualFunc(a.OnPodConditions, b.OnPodConditions,
		func(x, y batchv1.PodFailurePolicyOnPodConditionsPattern) bool {
			return x.Type == y.Type && x.Status == y.Status
		})
}
