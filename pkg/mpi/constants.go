package mpi

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
	SSHSecretMountPath = TorusEtcDir + "/ssh-secret"
	// SSHVolumeMountPath is where the init container fills the pod's SSH
	// volume: the SSH directory as SSHDirSubPath, the user database as
	// PasswdSubPath. The other containers mount those two by subPath.
	SSHVolumeMountPath = TorusEtcDir + "/ssh-volume"
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
	// WaitInitContainer is the launcher's last init container where the
	// image's OpenSSH launches the ranks: Torus's wait for the workers
	// (LaunchWaitArgs), from Torus's image. Launch-agent jobs wait in
	// SSHInitContainer.
	WaitInitContainer = "mpi-wait-workers"
	// PodInfoVolume is the launcher's downward API volume, holding
	// api.AnnotationWorkersReady as PodInfoWorkersReady, mounted at
	// PodInfoMountPath in the container that waits.
	PodInfoVolume       = "mpi-pod-info"
	PodInfoMountPath    = TorusEtcDir + "/pod"
	PodInfoWorkersReady = "workers-ready"
)

// IsTorusInitContainer reports whether an init container name is one Torus
// gives a job's pods: runtime patches may not change it.
func IsTorusInitContainer(name string) bool {
	return name == SSHInitContainer || name == WaitInitContainer
}

// IsTorusVolume reports whether a pod volume name is one Torus gives a job's
// keys and hostfile: a TrainJob's runtime patches may neither define nor
// mount a volume of that name.
func IsTorusVolume(name string) bool {
	return name == HostfileVolume || name == SSHSecretVolume || name == SSHVolume || name == LaunchVolume || name == LaunchImageVolume || name == PodInfoVolume || name == CheckpointVolume
}

// TorusMountPaths are the paths at or under which Torus mounts a job's
// files in its MPI container: the SSH directory (sshPath, the runtime's),
// the hostfile's directory, the user database, and Torus's own directories
// for the keys' volumes, the pod's information and the launch agent. A
// mount of another volume there would hide Torus's, or collide with it and
// keep the pod from being created.
func TorusMountPaths(sshPath string) []string {
	return []string{sshPath, HostfileDir, PasswdPath, TorusEtcDir, TorusOptDir}
}

// Torus's own directories in a job's containers: every mount path Torus
// chooses (SSHSecretMountPath, SSHVolumeMountPath, PodInfoMountPath,
// LaunchBinDir, LaunchImageMountPath) lies under one of them.
const (
	TorusEtcDir = "/etc/torus-mpi"
	TorusOptDir = "/opt/torus-mpi"
)

// Keys of the per-job SSH Secret. The Secret has type kubernetes.io/ssh-auth,
// whose required key is ssh-privatekey.
const (
	SSHPrivateKey     = "ssh-privatekey"
	sshPublicKey      = "ssh-publickey"
	sshAuthorizedKeys = "authorized_keys"
	SSHKnownHosts     = "known_hosts"
	SSHHostKey        = "ssh_host_ed25519_key"
	SSHHostPublicKey  = "ssh_host_ed25519_key.pub"
	SSHClientConfig   = "config"
	SSHDaemonConfig   = "sshd_config"
	// sshRun is the JobSet restart count the keys are for; sshNextPrefix
	// prefixes the keys of the run after it (see SSHSecretData).
	sshRun        = "run"
	sshNextPrefix = "next-"
)

// LabelJobSetRestartAttempt is JobSet's label on every pod of a run: the
// JobSet's restart count when the pod's Job was created.
const LabelJobSetRestartAttempt = "jobset.sigs.k8s.io/restart-attempt"

// EnvRestartAttempt hands the init container its pod's run.
const EnvRestartAttempt = "TORUS_MPI_RESTART_ATTEMPT"

// File names the keys get in the pod's SSH directory.
const (
	SSHPrivateKeyFile = "id_ed25519"
	sshPublicKeyFile  = "id_ed25519.pub"
	// upstreamPrivateKeyFile and upstreamPublicKeyFile are the names
	// upstream Trainer's MPI runtime images (DeepSpeed, MLX, built on
	// mpi-operator's base image) expect: their sshd runs with
	// "HostKey <ssh dir>/id_rsa", their one key pair serving as user key
	// and host key. Under these names Torus puts the job's host key, on the
	// workers only (sshFiles), never its client key: every pod holds that
	// one, and known_hosts does not trust it. OpenSSH reads a key's type
	// from its content, so the job's ed25519 host key serves as id_rsa;
	// ssh's identity is SSHPrivateKeyFile alone (ClientConfig).
	upstreamPrivateKeyFile = "id_rsa"
	upstreamPublicKeyFile  = "id_rsa.pub"
)

// DefaultRunAsUser is the UID the default runtimes run as where the platform
// assigns none: mpiuser of mpi-operator's MPI images, which the runtimes
// name and which declare no user of their own.
const DefaultRunAsUser int64 = 1000
