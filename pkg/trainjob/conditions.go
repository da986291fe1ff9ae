package trainjob

// Condition types Torus sets on TrainJobs, beside the upstream Suspended,
// Complete and Failed.
const (
	// ConditionCreated is True once the job's JobSet exists and the JobSet
	// controller reports on it (its first status); False says why Torus
	// will not create it; Unknown that the JobSet exists but its controller
	// has not reported yet.
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
	ReasonJobTooLarge         = "JobTooLarge"
	ReasonChildConflict       = "ChildConflict"
	ReasonJobSetRejected      = "JobSetRejected"
	ReasonJobSetPending       = "JobSetPending"
	ReasonJobSetNotReported   = "JobSetNotReported"
	ReasonRunning             = "Running"
	ReasonPending             = "Pending"
	// ReasonPodProblem: Running=False because a pod reports why it cannot
	// run (unschedulable, an image, a crash loop, a refused creation); the
	// message names the rank, the cause and the fix.
	ReasonPodProblem          = "PodProblem"
	ReasonSuspended           = "Suspended"
	ReasonResumed             = "Resumed"
	ReasonCompleted           = "Completed"
	ReasonFailed              = "Failed"
	ReasonDeadlineExceeded    = "DeadlineExceeded"
	ReasonSchedulingTimeout   = "SchedulingTimeout"
	ReasonDeadlineApproaching = "DeadlineApproaching"
	ReasonSSHKeysCreated      = "SSHKeysCreated"
	ReasonSSHKeysDeleted      = "SSHKeysDeleted"
)

// ConditionStalled is True while a running job is probably stuck: its
// launcher's output ended in a rank's failure (an exception, a CUDA or NCCL
// error) and has been quiet since, as when the other ranks wait for the
// failed one in a collective. It goes once the output goes on, or the job
// stops running.
const ConditionStalled = "Stalled"

// Reasons of ConditionStalled, and of a job failed for its stall timeout.
const (
	ReasonQuietAfterFailure = "QuietAfterFailure"
	ReasonStalled           = "Stalled"
)

// ConditionAdmitted mirrors the job's Kueue workload: True once Kueue
// admitted the whole job (launcher and every worker), False with Kueue's
// own words while it waits, or after it was evicted or preempted.
const ConditionAdmitted = "Admitted"

// Reasons of ConditionAdmitted.
const (
	ReasonQueued   = "Queued"
	ReasonAdmitted = "Admitted"
	ReasonEvicted  = "Evicted"
	ReasonRequeued = "Requeued"
)

// ConditionNetworksReady says whether every pod of a job that selects an
// MPINetworkProfile got its interfaces (and RDMA devices).
const ConditionNetworksReady = "NetworksReady"

// Reasons of ConditionNetworksReady.
const (
	ReasonNetworkNotReady   = "NetworkNotReady"
	ReasonNetworksAttached  = "NetworksAttached"
	ReasonNetworksPending   = "NetworksPending"
	ReasonInterfacesMissing = "InterfacesMissing"
)
