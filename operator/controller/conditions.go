package controller

// Condition types Torus sets on TrainJobs, beside the upstream Suspended,
// Complete and Failed.
const (
	// ConditionCreated is True once the job's JobSet exists; False says why
	// Torus will not create it.
	ConditionCreated = "Created"
	// ConditionRunning is True while the launcher and every worker run.
	ConditionRunning = "Running"
)

// Condition reasons and event reasons.
const (
	ReasonJobSetCreated       = "JobSetCreated"
	ReasonRuntimeNotFound     = "RuntimeNotFound"
	ReasonRuntimeNotSupported = "TrainingRuntimeNotSupported"
	ReasonInvalidJob          = "InvalidMPIJob"
	ReasonJobSetRejected      = "JobSetRejected"
	ReasonRunning             = "Running"
	ReasonPending             = "Pending"
	ReasonSuspended           = "Suspended"
	ReasonResumed             = "Resumed"
	ReasonCompleted           = "Completed"
	ReasonFailed              = "Failed"
	ReasonDeadlineExceeded    = "DeadlineExceeded"
	ReasonDeadlineApproaching = "DeadlineApproaching"
	ReasonSSHKeysCreated      = "SSHKeysCreated"
	ReasonSSHKeysDeleted      = "SSHKeysDeleted"
)

// maxConditionMessage is the API's limit on metav1.Condition messages.
const maxConditionMessage = 32768

func truncate(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	const ellipsis = "..."
	return msg[:maxConditionMessage-len(ellipsis)] + ellipsis
}
