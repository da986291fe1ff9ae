package mpi

import (
	"path"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/launch/cmdline"
)

// Torus's launch agent in a job's pods (SSHSettings.Agent): the binary
// torus-launch, from Torus's own image, serves remote launches on the
// workers and, under its client name, is the ssh MPI launchers run. The
// image needs MPI and the program, and no OpenSSH.
const (
	// LaunchVolume is the emptyDir the init container installs the binary
	// into; every container of the pod mounts it at LaunchBinDir.
	LaunchVolume = "mpi-launch"
	LaunchBinDir = TorusOptDir + "/bin"
	// LaunchBinary is the binary's name in LaunchBinDir.
	LaunchBinary = cmdline.Binary
	// LaunchImagePath is the binary's path in Torus's image.
	LaunchImagePath = "/" + LaunchBinary
	// LaunchImageVolume is Torus's image mounted as an image volume
	// (api.LaunchAgentByImageVolume), at LaunchImageMountPath in each
	// container, which runs LaunchImageVolumeBinary.
	LaunchImageVolume       = "mpi-launch-image"
	LaunchImageMountPath    = TorusOptDir + "/image"
	LaunchImageVolumeBinary = LaunchImageMountPath + LaunchImagePath
)

// ExitWorldLost is the exit code by which a container running torus-launch
// says its job's MPI world lost a host to something other than the program
// (cmdline.ExitWorldLost): the job's pod failure policy fails its Job on
// it, and the JobSet restarts the job without spending its restart budget.
const ExitWorldLost = cmdline.ExitWorldLost

// LaunchClient is the path of the client MPI launchers run in an agent job.
func LaunchClient() string { return path.Join(LaunchBinDir, cmdline.ClientName) }

// LaunchSetupArgs are the arguments of torus-launch setup, the init
// container of an agent job's pods (or the start of each container's
// command, LaunchFromImageCommand): it links the run's keys into the SSH
// directory from the Secret's volume, which the other containers mount
// too (the init container runs as the user of Torus's image, the others as
// their image's: a copy would be unreadable to them, a link leaves the
// kubelet's files as they are), and installs the binary into LaunchBinDir.
// The pod's run comes from EnvRestartAttempt, which the kubelet expands
// into the arguments.
func LaunchSetupArgs(s SSHSettings, role string) []string {
	return launchSetup(s, role).Args()
}

func launchSetup(s SSHSettings, role string) cmdline.Setup {
	setup := keysSetup(path.Join(SSHVolumeMountPath, SSHDirSubPath))
	setup.InstallDir = LaunchBinDir
	// The files of sshFiles the agent reads: the client key and known hosts
	// everywhere (workers launch in a tree too); the host key and the
	// authorized key on the workers, whose agent serves them.
	for _, f := range sshFiles {
		if !f.agent || (f.sshd && !runsSSHD(role)) {
			continue
		}
		setup.Files = append(setup.Files, f.launchFile())
	}
	return setup
}

// LaunchFromImageCommand is the command of an agent job's container whose
// image holds torus-launch (SSHSettings.AgentBinary): the image's binary
// does the setup of LaunchSetupArgs in the container itself, then command
// (LaunchAgentCommand, LaunchWaitCommand) runs in its place. The pod needs
// no init container, whose exit the kubelet learns of only at its next
// relist of the pod's containers, up to a second later.
func LaunchFromImageCommand(s SSHSettings, role string, command []string) []string {
	setup := launchSetup(s, role)
	setup.Command = command
	return append([]string{s.AgentBinary}, setup.Args()...)
}

// LauncherSetupWaitArgs are LaunchSetupArgs for a launcher whose command
// Torus cannot wrap (LaunchWaitCommand): its container runs its image's
// entrypoint, so the setup waits for the workers (workersWait) before it
// ends. callBack is as for SSHSetupScript.
func LauncherSetupWaitArgs(s SSHSettings, callBack string) []string {
	setup := launchSetup(s, api.RoleLauncher)
	w := workersWait(s, callBack, true)
	setup.Wait = &w
	return setup.Args()
}

// LaunchWaitCommand is an agent job's launcher command: torus-launch wait
// for the workers (workersWait), then command in its place. Waiting in the
// launcher's own container rather than in an init container takes one
// container's exit off the path to mpirun: the kubelet learns of an init
// container's exit at its next relist of the pod's containers, up to a
// second later. The wait's reasons are held back for launcherWaitQuiet, so
// a launcher whose workers start with it logs only its program.
//
// afterReady is for a launcher created once its workers were Ready (JobSet
// dependsOn): its wait is bounded from its start, and reads no mark.
func LaunchWaitCommand(s SSHSettings, callBack string, afterReady bool, command []string) []string {
	wait := cmdline.WaitThenRun{
		Dir:     s.AgentDir(),
		Quiet:   launcherWaitQuiet,
		Wait:    workersWait(s, callBack, !afterReady),
		Command: command,
	}
	return append([]string{path.Join(LaunchBinDir, LaunchBinary)}, wait.Args()...)
}

// launcherWaitQuiet is how long the launcher's own wait keeps its reasons
// to itself: about what two nodes need to start a pod with an init
// container; past it, a slow worker is worth a line.
const launcherWaitQuiet = 5 * time.Second

// LaunchWaitArgs are the arguments of torus-launch setup as the launcher's
// WaitInitContainer where the image's OpenSSH launches the ranks: it links
// the run's client key and known hosts into a directory of its own and
// waits for the workers' sshd (workersWait). sshd lets in the pod's own user
// alone, whom this container need not be: the wait ends at the job's host
// key, as ssh-keyscan would, and leaves logging in to mpirun.
func LaunchWaitArgs(s SSHSettings, callBack string) []string {
	setup := keysSetup(path.Join(SSHVolumeMountPath, waitDirSubPath))
	for _, f := range sshFiles {
		if f.file == SSHPrivateKeyFile || f.file == SSHKnownHosts {
			setup.Files = append(setup.Files, f.launchFile())
		}
	}
	w := workersWait(s, callBack, true)
	w.HostKeyOnly = true
	setup.Wait = &w
	return setup.Args()
}

// waitDirSubPath is the directory of LaunchWaitArgs in the SSH volume.
const waitDirSubPath = "wait"

// keysSetup is torus-launch setup linking a run's keys into dir.
func keysSetup(dir string) cmdline.Setup {
	return cmdline.Setup{
		SecretDir:  SSHSecretMountPath,
		Dir:        dir,
		RunKey:     sshRun,
		NextPrefix: sshNextPrefix,
		Run:        "$(" + EnvRestartAttempt + ")",
		Link:       true,
	}
}

// workersWait makes torus-launch wait, on the launcher, until every host of
// the hostfile resolves and accepts a connection on the job's port that
// proves it the job's (callBack, if set, must resolve too). The launcher
// starts with its workers, so the wait lasts as long as the slowest takes
// to start, however long its image takes to pull; once Torus has seen every
// worker Ready (PodInfoWorkersReady), a host still refusing for
// hostsAcceptTimeout is kept from the launcher by the network, and mpirun
// starts to say so in its own words.
//
// readsMark is false for a launcher created once its workers were Ready:
// its bound counts from its start.
func workersWait(s SSHSettings, callBack string, readsMark bool) cmdline.Wait {
	w := cmdline.Wait{
		Hostfile:   path.Join(SSHSecretMountPath, HostfileKey),
		Port:       int(s.Port),
		Key:        SSHPrivateKeyFile,
		KnownHosts: SSHKnownHosts,
		Timeout:    hostsAcceptTimeout,
		CallBack:   callBack,
	}
	if readsMark {
		w.ReadyFile = path.Join(PodInfoMountPath, PodInfoWorkersReady)
	}
	return w
}

// launchFile is a file's entry in torus-launch setup.
func (f sshFile) launchFile() cmdline.File {
	return cmdline.File{Key: f.key, Name: f.file, Mode: f.mode, Keyed: f.keyed}
}

// PodInfoVolumeSource is the launcher's downward API volume (PodInfoVolume).
func PodInfoVolumeSource() corev1.VolumeSource {
	return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{{
			Path:     PodInfoWorkersReady,
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + api.AnnotationWorkersReady + "']"},
		}},
	}}
}

// LaunchAgentCommand is a worker's command in an agent job: the agent,
// serving the job's host key to holders of the job's client key on the
// job's port.
func LaunchAgentCommand(s SSHSettings) []string {
	agent := cmdline.Agent{
		Listen:         ":" + strconv.Itoa(int(s.Port)),
		HostKey:        path.Join(s.AgentDir(), SSHHostKey),
		AuthorizedKeys: path.Join(s.AgentDir(), sshAuthorizedKeys),
	}
	return append([]string{path.Join(LaunchBinDir, LaunchBinary)}, agent.Args()...)
}

// LaunchEnv is the environment of every container of an agent job: the
// implementation's variable naming the client in place of ssh, and the
// client's key, known hosts and port.
func LaunchEnv(impl Implementation, s SSHSettings) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: impl.of().agentEnv, Value: LaunchClient()},
		{Name: cmdline.EnvKey, Value: path.Join(s.AgentDir(), SSHPrivateKeyFile)},
		{Name: cmdline.EnvKnownHosts, Value: path.Join(s.AgentDir(), SSHKnownHosts)},
		{Name: cmdline.EnvPort, Value: strconv.Itoa(int(s.Port))},
	}
}

// RemoteLaunch names how a job's daemons are started, as
// api.AnnotationRemoteLaunch spells it.
func (s SSHSettings) RemoteLaunch() string {
	if s.Agent {
		return api.RemoteLaunchAgent
	}
	return api.RemoteLaunchOpenSSH
}
