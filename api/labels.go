// Package api is Torus's API: the MPINetworkProfile custom resource
// (v1alpha1) and the labels and annotations Torus reads and writes on
// TrainJobs, runtimes, JobSets and pods. Everything Torus defines lives under
// the torus-mpi.io/ prefix.
package api

// Labels and annotations.
const (
	// Domain prefixes every Torus label and annotation.
	Domain = "torus-mpi.io/"

	// LabelJobName is set on the JobSet and every pod of a TrainJob; its value
	// is the TrainJob's name. The plugin selects a job's pods with it.
	LabelJobName = Domain + "job-name"
	// LabelRole marks a pod as the job's launcher or one of its workers.
	LabelRole = Domain + "role"
	// LabelImplementation is defaulted onto MPI TrainJobs by the admission
	// webhook (OpenMPI, OpenMPI5, Intel, MPICH) so clients can list MPI jobs
	// with a label selector.
	LabelImplementation = Domain + "mpi-implementation"
	// LabelDefaultRuntime marks the ClusterTrainingRuntimes the operator
	// installs (one per implementation); kubectl mpi doctor looks for it.
	LabelDefaultRuntime = Domain + "default-runtime"

	// AnnotationOpenMPIVersion, on a runtime or a TrainJob, selects Open MPI 5
	// ("5") over the default Open MPI 4 ("4"). The Trainer API has a single
	// OpenMPI value; the two majors need different environments (PRRTE).
	AnnotationOpenMPIVersion = Domain + "openmpi-version"
	// AnnotationMaxRestarts, on a TrainJob, is how many times its whole MPI
	// world may start again after the program fails, over the runtime's
	// failurePolicy.maxRestarts (0 by default: a failure fails the job).
	// A pod disrupted, evicted or preempted, or lost with its node,
	// restarts the job without spending it.
	AnnotationMaxRestarts = Domain + "max-restarts"
	// AnnotationCheckpointVolume, on a TrainJob, is CLAIM or CLAIM:/path: a
	// PersistentVolumeClaim of its namespace mounted in the launcher and
	// every worker (at /checkpoint by default), where the program keeps the
	// checkpoints a restarted run resumes from. Its containers get
	// TORUS_CHECKPOINT_DIR and TORUS_RESTART_ATTEMPT.
	AnnotationCheckpointVolume = Domain + "checkpoint-volume"
	// AnnotationKeepSSHKeys set to "true" keeps a finished job's SSH Secret.
	AnnotationKeepSSHKeys = Domain + "keep-ssh-keys"
	// AnnotationSSHPort, on a runtime or a TrainJob, overrides sshd's port.
	AnnotationSSHPort = Domain + "ssh-port"
	// AnnotationSSHKeyAlgorithm, on a runtime or a TrainJob, chooses the
	// type of the job's SSH keys (KeyAlgorithms) over the operator's
	// --ssh-key-algorithm.
	AnnotationSSHKeyAlgorithm = Domain + "ssh-key-algorithm"
	// AnnotationRemoteLaunch, on a runtime or a TrainJob, chooses how the
	// launcher starts MPI's daemons on the workers: RemoteLaunchAgent
	// (Torus's agent, delivered into the pods from Torus's image: the
	// image needs no OpenSSH) or RemoteLaunchOpenSSH (the image's sshd and
	// ssh, as upstream's and mpi-operator's images expect). Unset is
	// RemoteLaunchOpenSSH.
	AnnotationRemoteLaunch = Domain + "remote-launch"
	// AnnotationLaunchAgentPath, on a runtime or a TrainJob of the launch
	// agent (RemoteLaunchAgent), is where the job's image holds
	// torus-launch, of the operator's release: the pods then run it from
	// there and start with no init container. On a runtime it holds for
	// the runtime's own image, not for a job that sets its own
	// (spec.trainer.image). Unset, an init container from Torus's image
	// brings the binary into each pod.
	AnnotationLaunchAgentPath = Domain + "launch-agent-path"
	// AnnotationLaunchAgentDelivery, on a runtime or a TrainJob of the
	// launch agent whose image does not hold torus-launch, chooses how the
	// binary reaches its pods, over the operator's --launch-agent-delivery:
	// LaunchAgentByInitContainer, LaunchAgentByImageVolume or
	// LaunchAgentAuto.
	AnnotationLaunchAgentDelivery = Domain + "launch-agent-delivery"
	// AnnotationSchedulingTimeout, on a runtime or a TrainJob, is how long
	// (a Go duration, e.g. "10m") a started job may wait for all its ranks
	// to run before it fails with reason SchedulingTimeout, releasing what
	// it holds. Time queued in Kueue before admission does not count.
	AnnotationSchedulingTimeout = Domain + "scheduling-timeout"
	// AnnotationTerminationGracePeriod, on a runtime or a TrainJob, is how
	// long every rank has, from SIGTERM, to write a checkpoint and exit
	// when the job is stopped, preempted or restarted (a Go duration of
	// whole seconds, such as 5m): its pods' terminationGracePeriodSeconds.
	AnnotationTerminationGracePeriod = Domain + "termination-grace-period"
	// AnnotationStallTimeout, on a runtime or a TrainJob, is how long (a Go
	// duration, e.g. "30m") a running job's launcher may print nothing
	// before the job fails with reason Stalled, releasing what it holds: a
	// rank that raised while the others wait in a collective never ends.
	// A launcher that waits for its workers is held to it from when they
	// are all Ready (AnnotationWorkersReady).
	AnnotationStallTimeout = Domain + "stall-timeout"
	// AnnotationTopology, on a runtime or a TrainJob, names the node label
	// (e.g. a rack or block label) whose domain all of the job's pods must
	// share; it becomes Kueue's topology-aware scheduling annotations.
	AnnotationTopology = Domain + "topology"
	// AnnotationNetworkProfile, on a TrainJob, names the MPINetworkProfile
	// (InfiniBand/RoCE attachments, RDMA devices, fabric environment) its
	// pods get.
	AnnotationNetworkProfile = Domain + "network-profile"
	// AnnotationNetworkPolicy set to NetworkPolicyRestricted, on a namespace
	// or a runtime, gives each job a NetworkPolicy admitting only its own
	// pods.
	AnnotationNetworkPolicy = Domain + "network-policy"
	// AnnotationRerunOf, on a TrainJob made by kubectl mpi rerun, names the
	// job whose configuration it copied, so that describe can show it.
	AnnotationRerunOf = Domain + "rerun-of"
	// AnnotationRuntimeCopyOf marks a job's own copy of a runtime, holding
	// the job's volumes, with the runtime it copies ("Kind/name"): kubectl
	// mpi rerun and the dashboard's clone run such a job again on the
	// runtime it copies, the copy's volumes in the new job's runtime patch.
	AnnotationRuntimeCopyOf = Domain + "runtime-copy-of"
	// AnnotationSpecHash records the hash of the desired state an owned object
	// was written from, so an unchanged desired state costs no write.
	AnnotationSpecHash = Domain + "spec-hash"
	// AnnotationSuspendedByTorus marks a JobSet Torus suspended because its
	// TrainJob was suspended. Torus resumes only JobSets so marked: one
	// suspended by anyone else (Kueue, which holds the JobSets it manages
	// until it admits them) is theirs to resume.
	AnnotationSuspendedByTorus = Domain + "suspended-by-trainjob"
	// AnnotationJob records, on the JobSet, the job as Torus resolved it
	// from the TrainJob, its runtime and network profile (EncodeJob): once
	// the JobSet exists, the job is tracked from what it started with, even
	// if the runtime or profile is deleted or an annotation goes bad.
	AnnotationJob = Domain + "job"
	// AnnotationProof is, on each child Torus makes (the JobSet, the SSH
	// Secret, the NetworkPolicy), a keyed hash only the operator can compute:
	// Torus uses, updates and deletes only children that carry a valid one.
	AnnotationProof = Domain + "proof"
	// AnnotationProofData is, on the SSH Secret, a keyed hash of its data as
	// well: the stamp of its name can be copied onto another Secret of that
	// name by whoever reads the real one, its data's cannot be made to fit
	// other keys. Torus takes a restarted run's keys only from data it made.
	AnnotationProofData = Domain + "proof-data"
	// AnnotationCreatedBy, on an MPI TrainJob, is the user who created it,
	// as the API server authenticated them. Torus's admission webhook writes
	// it on create and keeps it on every update: nobody sets or changes it.
	AnnotationCreatedBy = Domain + "created-by"
	// AnnotationJobSetRestarts records, on the SSH Secret, the JobSet restart
	// count the keys were generated for; a restart gets new keys.
	AnnotationJobSetRestarts = Domain + "jobset-restarts"
	// AnnotationQuotaReserved records, on a queued job's SSH Secret, when
	// Kueue reserved the quota the keys were made for (its workload's
	// QuotaReserved condition, RFC 3339): keys of another reservation are
	// those of a run Kueue evicted.
	AnnotationQuotaReserved = Domain + "quota-reserved"
	// AnnotationWorkersReady, on a launcher's pod, is when Torus saw every
	// worker of the pod's run Ready (RFC 3339). The launcher starts with its
	// workers and waits until each accepts the job's key; this mark, which
	// the pod reads through the downward API, is what bounds that wait: a
	// worker not yet started may refuse connections for as long as its
	// image takes to pull, a Ready worker that still refuses them is kept
	// from the launcher by the network.
	AnnotationWorkersReady = Domain + "workers-ready"
)

// SchedulingGateSSHKeys holds the pods of a job Kueue admits until Torus
// has made that run's SSH keys. Kueue, not Torus, resumes such a job, so its
// pods may exist before the keys do; the gate keeps them off every node, and
// so keeps any Secret of the keys' name unmounted, until Torus has made the
// keys and removes it: from the pods already created, with a write each,
// and from the first run's pods created after the keys, as the API server
// admits them.
const SchedulingGateSSHKeys = Domain + "ssh-keys"

// Values of AnnotationRemoteLaunch.
const (
	RemoteLaunchAgent   = "agent"
	RemoteLaunchOpenSSH = "openssh"
)

// Values of AnnotationLaunchAgentDelivery.
const (
	// LaunchAgentByInitContainer: an init container copies torus-launch
	// from Torus's image into each pod. Any node runs it; the pod's
	// containers start one relist of the kubelet after the init container
	// ends.
	LaunchAgentByInitContainer = "init-container"
	// LaunchAgentByImageVolume: Torus's image is mounted into each pod as
	// an image volume, and each container sets itself up from it, with no
	// init container. The nodes' runtime must mount image volumes
	// (Kubernetes 1.35 or later with containerd 2.1 or CRI-O 1.31 or
	// later).
	LaunchAgentByImageVolume = "image-volume"
	// LaunchAgentAuto: LaunchAgentByImageVolume where every node the job's
	// pods may run on mounts image volumes and no OpenShift
	// SecurityContextConstraints decide the pods' volumes (its default
	// ones do not admit image volumes), LaunchAgentByInitContainer
	// elsewhere. It is settled when the job's JobSet is made.
	LaunchAgentAuto = "auto"
)

// NetworkPolicyRestricted is the value of AnnotationNetworkPolicy that asks
// for a per-job NetworkPolicy.
const NetworkPolicyRestricted = "restricted"

// Roles, the values of LabelRole.
const (
	RoleLauncher = "launcher"
	RoleWorker   = "worker"
)
