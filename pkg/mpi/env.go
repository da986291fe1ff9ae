package mpi

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Environment variable names Torus sets on the launcher.
const (
	EnvOMPIHostfile        = "OMPI_MCA_orte_default_hostfile"
	envOMPIKeepFQDN        = "OMPI_MCA_orte_keep_fqdn_hostnames"
	envOMPIDefaultSlots    = "OMPI_MCA_orte_set_default_slots"
	EnvOMPIRSHArgs         = "OMPI_MCA_plm_rsh_args"
	envOMPIEnvList         = "OMPI_MCA_mca_base_env_list"
	envOMPIVaderSingleCopy = "OMPI_MCA_btl_vader_single_copy_mechanism"
	envPRTEHostfile        = "PRTE_MCA_prte_default_hostfile"
	envPRTEKeepFQDN        = "PRTE_MCA_prte_keep_fqdn_hostnames"
	envPRTESSHArgs         = "PRTE_MCA_plm_ssh_args"
	envIntelHostfile       = "I_MPI_HYDRA_HOST_FILE"
	envIntelBootstrap      = "I_MPI_HYDRA_BOOTSTRAP"
	envIntelBootstrapArg   = "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"
	envIntelPerHost        = "I_MPI_PERHOST"
	envHydraHostfile       = "HYDRA_HOST_FILE"
	envHydraLauncher       = "HYDRA_LAUNCHER"
	EnvHydraLaunchArgs     = "HYDRA_LAUNCHER_EXTRA_ARGS"
	// The programs each implementation runs in place of ssh.
	envOMPIRSHAgent       = "OMPI_MCA_plm_rsh_agent"
	envPRTESSHAgent       = "PRTE_MCA_plm_ssh_agent"
	envIntelBootstrapExec = "I_MPI_HYDRA_BOOTSTRAP_EXEC"
	envHydraLauncherExec  = "HYDRA_LAUNCHER_EXEC"
)

// ReservedEnvNames are the variables Torus owns; a TrainJob may not set them.
var ReservedEnvNames = sets.New(
	EnvOMPIHostfile, envOMPIKeepFQDN, envOMPIDefaultSlots, EnvOMPIRSHArgs, envOMPIEnvList,
	envPRTEHostfile, envPRTEKeepFQDN, envPRTESSHArgs,
	envIntelHostfile, envIntelBootstrap, envIntelBootstrapArg, envIntelPerHost,
	envHydraHostfile, envHydraLauncher, EnvHydraLaunchArgs,
	EnvCheckpointDir, EnvRunAttempt,
)

// sshArgs are the arguments every implementation passes to ssh: the job's
// client configuration, which names its key, known_hosts and port.
func sshArgs(sshPath string) string {
	return "-F " + sshPath + "/" + SSHClientConfig
}

// LauncherEnv is the environment the launcher's MPI runtime reads: where the
// hostfile is, how many slots a host has and how to reach hosts over ssh.
//
// forward names the job's own variables (the TrainJob's env, a network
// profile's). Ranks on workers are started through sshd, whose sessions do
// not inherit the worker container's environment: only what mpirun forwards
// reaches them. Hydra (Intel MPI, MPICH) forwards the launcher's whole
// environment; Open MPI forwards only OMPI_* unless told, which
// mca_base_env_list does.
func LauncherEnv(impl Implementation, slotsPerHost int32, sshPath string, forward []string) []corev1.EnvVar {
	f := impl.of()
	env := f.env(strconv.Itoa(int(slotsPerHost)), sshArgs(sshPath))
	if len(forward) > 0 && !f.forwardsAll {
		env = append(env, corev1.EnvVar{Name: envOMPIEnvList, Value: strings.Join(forward, ";")})
	}
	return env
}

// LauncherDefaults are launcher settings of the implementation that the
// job's own environment, when it sets them, overrides.
func LauncherDefaults(impl Implementation) []corev1.EnvVar {
	return slices.Clone(impl.of().defaults)
}

// RunEnv is a variable named name holding the pod's run: JobSet's
// restart-attempt label, through the downward API.
func RunEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + LabelJobSetRestartAttempt + "']"},
	}}
}
