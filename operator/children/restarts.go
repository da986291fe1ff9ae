package children

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// RuleDisrupted is the JobSet failure policy rule by which a job whose MPI
// world lost a pod to something other than the program (evicted,
// preempted, deleted, lost with its node) starts again without spending
// its restart budget.
const RuleDisrupted = "TorusPodDisrupted"

// disruptedMessages are the failure messages of a Job that the pod failure
// policy (failWhenDisrupted) failed for a disruption: a pod's condition
// DisruptionTarget, or the MPI container's exit code mpi.ExitWorldLost, in
// the Job controller's words ("... failed with exit code 75 matching
// FailJob rule at index 1").
var disruptedMessages = []string{
	string(corev1.DisruptionTarget),
	fmt.Sprintf("with exit code %d matching %s rule", mpi.ExitWorldLost, batchv1.PodFailurePolicyActionFailJob),
}

// restartPolicy is the job's in the JobSet's own terms. An MPI world cannot
// take a replacement for one of its ranks, so a failed Job restarts the
// whole JobSet, and BlockingRecreate (unless the runtime chose another
// strategy) removes every pod of the run before the next run's start. A Job
// that failed because its world lost a pod (failWhenDisrupted) restarts it
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
		OnJobFailureMessagePatterns: disruptedMessages,
	}}, rules...)
	js.Spec.FailurePolicy = fp
}

// failWhenDisrupted fails a Job at once, with reason PodFailurePolicy and a
// message the JobSet's rule (restartPolicy) tells from the program's
// failure, when the job's world lost one of its pods to something other
// than the program:
//
//   - a pod marked DisruptionTarget: the API server's eviction, the
//     scheduler's preemption, the taint manager and the pod garbage
//     collector (a lost node) mark the pods they stop so;
//   - where the container's exit speaks for its world (worldLostExit: a
//     worker's launch agent, a launcher Torus wraps), its exit code
//     mpi.ExitWorldLost: the agent stopped while it ran the job's commands
//     (its pod deleted, whoever asked), or the launcher lost a host or was
//     stopped itself.
//
// The Job API allows a pod failure policy only for pods that are never
// restarted in place.
func failWhenDisrupted(spec *batchv1.JobSpec, worldLostExit bool) {
	if spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return
	}
	rules := []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}
	if worldLostExit {
		rules = append(rules, batchv1.PodFailurePolicyRule{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To(mpi.TrainerContainer),
				Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
				Values:        []int32{mpi.ExitWorldLost},
			},
		})
	}
	if spec.PodFailurePolicy == nil {
		spec.PodFailurePolicy = &batchv1.PodFailurePolicy{}
	}
	// Torus's rules first, once each, then the runtime's.
	theirs := slices.DeleteFunc(slices.Clone(spec.PodFailurePolicy.Rules), func(r batchv1.PodFailurePolicyRule) bool {
		return slices.ContainsFunc(rules, func(t batchv1.PodFailurePolicyRule) bool { return equality.Semantic.DeepEqual(r, t) })
	})
	spec.PodFailurePolicy.Rules = append(rules, theirs...)
}
