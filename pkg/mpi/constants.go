package mpi

// Labels and annotations. Everything Torus defines lives under torus-mpi.io/.
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
	// AnnotationKeepSSHKeys set to "true" keeps a finished job's SSH Secret.
	AnnotationKeepSSHKeys = Domain + "keep-ssh-keys"
	// AnnotationSSHPort, on a runtime or a TrainJob, overrides sshd's port.
	AnnotationSSHPort = Domain + "ssh-port"
	// AnnotationSSHKeyAlgorithm, on a runtime or a TrainJob, chooses the
	// type of the job's SSH keys (KeyAlgorithms) over the operator's
	// --ssh-key-algorithm.
	AnnotationSSHKeyAlgorithm = Domain + "ssh-key-algorithm"
	// AnnotationSchedulingTimeout, on a runtime or a TrainJob, is how long
	// (a Go duration, e.g. "10m") a started job may wait for all its ranks
	// to run before it fails with reason SchedulingTimeout, releasing what
	// it holds. Time queued in Kueue before admission does not count.
	AnnotationSchedulingTimeout = Domain + "scheduling-timeout"
	// AnnotationTopology, on a runtime or a TrainJob, names the node label
	// (e.g. a rack or block label) whose domain all of the job's pods must
	// share; it becomes Kueue's topology-aware scheduling annotations.
	AnnotationTopology = Domain + "topology"
	// AnnotationNetworkProfile, on a TrainJob, names the MPINetworkProfile
	// (InfiniBand/RoCE attachments, RDMA devices, fabric environment) its
	// pods get.
	AnnotationNetworkProfile = Domain + "network-profile"
	// AnnotationRerunOf, on a TrainJob made by kubectl mpi rerun, names the
	// job whose configuration it copied, so that describe can show it.
	AnnotationRerunOf = Domain + "rerun-of"
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
	// AnnotationJobSetRestarts records, on the SSH Secret, the JobSet restart
	// count the keys were generated for; a restart gets new keys.
	AnnotationJobSetRestarts = Domain + "jobset-restarts"
)

// Roles, the values of LabelRole.
const (
	RoleLauncher = "launcher"
	RoleWorker   = "worker"
)

// Names fixed by the Trainer runtime contract.
const (
	// LauncherJob and NodeJob are the replicated jobs of an MPI runtime.
	LauncherJob = "launcher"
	NodeJob     = "node"
	// TrainerContainer is the container Trainer fields (image, command, env,
	// resources) apply to, in both replicated jobs.
	TrainerContainer = "node"
	// LabelAncestor marks the replicated job that runs the training command.
	LabelAncestor   = "trainer.kubeflow.org/trainjob-ancestor-step"
	AncestorTrainer = "trainer"

	// TrainerManagedBy is the managedBy value of TrainJobs for the built-in
	// Trainer controller; Torus reconciles exactly those.
	TrainerManagedBy = "trainer.kubeflow.org/trainjob-controller"
)

// Files and paths inside the pods.
const (
	HostfileDir    = "/etc/mpi"
	HostfileKey    = "hostfile"
	HostfilePath   = HostfileDir + "/" + HostfileKey
	DefaultSSHPath = "/root/.ssh"
	DefaultSSHPort = 2222

	// SSHSecretMountPath is where the init container reads the Secret.
	SSHSecretMountPath = "/etc/torus-mpi/ssh-secret"
	// SSHVolumeMountPath is where the init container fills the pod's SSH
	// volume: the SSH directory as SSHDirSubPath, the user database as
	// PasswdSubPath. The other containers mount those two by subPath.
	SSHVolumeMountPath = "/etc/torus-mpi/ssh-volume"
	SSHDirSubPath      = "ssh"
	PasswdSubPath      = "passwd"
	// PasswdPath is the user database ssh and sshd read.
	PasswdPath = "/etc/passwd"
	// PasswdUser names the account the init container adds for a UID the
	// image does not know (OpenShift assigns one from the namespace's range).
	PasswdUser = "torus-mpi"

	// Volume and container names Torus adds to pod templates.
	HostfileVolume   = "mpi-hostfile"
	SSHSecretVolume  = "mpi-ssh-secret"
	SSHVolume        = "mpi-ssh"
	SSHInitContainer = "mpi-ssh-setup"
)

// Keys of the per-job SSH Secret. The Secret has type kubernetes.io/ssh-auth,
// whose required key is ssh-privatekey.
const (
	SSHPrivateKey     = "ssh-privatekey"
	SSHPublicKey      = "ssh-publickey"
	SSHAuthorizedKeys = "authorized_keys"
	SSHKnownHosts     = "known_hosts"
	SSHHostKey        = "ssh_host_ed25519_key"
	SSHHostPublicKey  = "ssh_host_ed25519_key.pub"
	SSHClientConfig   = "config"
	SSHDaemonConfig   = "sshd_config"
	// SSHRun is the JobSet restart count the keys are for; SSHNextPrefix
	// prefixes the keys of the run after it (see SSHSecretData).
	SSHRun        = "run"
	SSHNextPrefix = "next-"
)

// LabelJobSetRestartAttempt is JobSet's label on every pod of a run: the
// JobSet's restart count when the pod's Job was created.
const LabelJobSetRestartAttempt = "jobset.sigs.k8s.io/restart-attempt"

// EnvRestartAttempt hands the init container its pod's run.
const EnvRestartAttempt = "TORUS_MPI_RESTART_ATTEMPT"

// File names the keys get in the pod's SSH directory.
const (
	SSHPrivateKeyFile = "id_ed25519"
	SSHPublicKeyFile  = "id_ed25519.pub"
	// UpstreamPrivateKeyFile and UpstreamPublicKeyFile are the names
	// upstream Trainer's MPI runtime images (DeepSpeed, MLX, built on
	// mpi-operator's base image) expect: their sshd runs with
	// "HostKey <ssh dir>/id_rsa", the job's one key pair serving as user
	// key and host key. OpenSSH reads a key's type from its content, so the
	// job's ed25519 key serves under these names too.
	UpstreamPrivateKeyFile = "id_rsa"
	UpstreamPublicKeyFile  = "id_rsa.pub"
)

// DefaultRunAsUser is the UID the default runtimes run as where the platform
// assigns none: mpiuser of mpi-operator's MPI images, which the runtimes
// name and which declare no user of their own.
const DefaultRunAsUser int64 = 1000
