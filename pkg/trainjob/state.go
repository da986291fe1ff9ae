package trainjob

import (
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phases an MPI TrainJob is in, in the order a job goes through them, as
// kubectl mpi shows them and the operator's torus_trainjobs gauge counts
// them.
const (
	// PhaseCreating: the operator has not reported on the job yet.
	PhaseCreating = "Creating"
	// PhaseBlocked: the operator will not create the job's pods (a missing
	// runtime, an invalid job); the message says what to fix.
	PhaseBlocked = "Blocked"
	// PhaseQueued: Kueue has not admitted the job yet.
	PhaseQueued = "Queued"
	// PhasePending: admitted (or not queued), pods are starting.
	PhasePending = "Pending"
	// PhaseRestarting: the job lost its MPI world and starts a new one,
	// which resumes from the program's last checkpoint (ConditionRestarted
	// says why).
	PhaseRestarting = "Restarting"
	PhaseRunning    = "Running"
	PhaseSuspended  = "Suspended"
	PhaseComplete   = "Complete"
	PhaseFailed     = "Failed"
	PhaseDeleting   = "Deleting"
)

// State is where a job is and since when.
type State struct {
	Phase string `json:"phase"`
	// Since is when the job entered the phase; zero when unknown.
	Since   time.Time `json:"since"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	// Stalled says why a running job is probably stuck (ConditionStalled),
	// and since when; empty while it is not.
	Stalled      string    `json:"stalled,omitempty"`
	StalledSince time.Time `json:"stalledSince,omitzero"`
}

// StateOf derives a job's state from its conditions.
func StateOf(tj *trainer.TrainJob) State {
	conds := tj.Status.Conditions
	from := func(phase string, c *metav1.Condition) State {
		return State{Phase: phase, Since: c.LastTransitionTime.Time, Reason: c.Reason, Message: c.Message}
	}
	if tj.DeletionTimestamp != nil {
		return State{Phase: PhaseDeleting, Since: tj.DeletionTimestamp.Time, Reason: "Deleting", Message: "The job is being deleted"}
	}
	if c := trueCondition(conds, trainer.TrainJobFailed); c != nil {
		return from(PhaseFailed, c)
	}
	if c := trueCondition(conds, trainer.TrainJobComplete); c != nil {
		return from(PhaseComplete, c)
	}
	if c := trueCondition(conds, trainer.TrainJobSuspended); c != nil {
		return from(PhaseSuspended, c)
	}
	if c := meta.FindStatusCondition(conds, ConditionCreated); c != nil && c.Status == metav1.ConditionFalse {
		return from(PhaseBlocked, c)
	}
	if c := meta.FindStatusCondition(conds, ConditionCreated); c != nil && c.Status == metav1.ConditionUnknown {
		// The JobSet exists; its controller has not started it yet.
		return from(PhaseCreating, c)
	}
	if c := meta.FindStatusCondition(conds, ConditionAdmitted); c != nil && c.Status == metav1.ConditionFalse {
		return from(PhaseQueued, c)
	}
	if c := meta.FindStatusCondition(conds, ConditionRunning); c != nil {
		switch {
		case c.Status == metav1.ConditionTrue:
			st := from(PhaseRunning, c)
			if s := trueCondition(conds, ConditionStalled); s != nil {
				st.Stalled, st.StalledSince = s.Message, s.LastTransitionTime.Time
			}
			return st
		case c.Reason == ReasonQueued:
			return from(PhaseQueued, c)
		case c.Reason == ReasonSuspended:
			return from(PhaseSuspended, c)
		case c.Reason == ReasonRestarting:
			return from(PhaseRestarting, c)
		default:
			s := from(PhasePending, c)
			// The phase began when the job was created or admitted, not
			// at the latest change of the pending message.
			if created := meta.FindStatusCondition(conds, ConditionCreated); created != nil {
				s.Since = created.LastTransitionTime.Time
			}
			if admitted := trueCondition(conds, ConditionAdmitted); admitted != nil && admitted.LastTransitionTime.After(s.Since) {
				s.Since = admitted.LastTransitionTime.Time
			}
			return s
		}
	}
	if c := trueCondition(conds, ConditionCreated); c != nil {
		return from(PhasePending, c)
	}
	return State{Phase: PhaseCreating, Since: tj.CreationTimestamp.Time, Message: "Waiting for the Torus operator to create the job's JobSet, and the JobSet controller to start it"}
}

// Finished reports whether the job reached Complete or Failed.
func Finished(tj *trainer.TrainJob) bool {
	return trueCondition(tj.Status.Conditions, trainer.TrainJobComplete) != nil ||
		trueCondition(tj.Status.Conditions, trainer.TrainJobFailed) != nil
}

func trueCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}
