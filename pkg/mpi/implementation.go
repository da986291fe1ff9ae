package mpi

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/api"
)

// Implementation is an MPI implementation as Torus distinguishes them. The
// Trainer API names OpenMPI, Intel and MPICH; Torus splits OpenMPI by major
// version because Open MPI 5 replaced ORTE with PRRTE and its environment.
type Implementation string

const (
	OpenMPI  Implementation = "OpenMPI"
	OpenMPI5 Implementation = "OpenMPI5"
	IntelMPI Implementation = "Intel"
	MPICH    Implementation = "MPICH"
)

// facts is everything Torus knows of one MPI implementation: what its
// launcher reads and how people and APIs name it. Supporting another
// implementation is one entry in table.
type facts struct {
	impl Implementation
	// display is the name people know it by.
	display string
	// cliNames are the plugin's --mpi spellings, the canonical one first.
	cliNames []string
	// runtime is the ClusterTrainingRuntime shipped in samples/ for it.
	runtime string
	// trainer is its mlPolicy.mpi.mpiImplementation.
	trainer trainer.MPIImplementation
	// openMPIVersion is the api.AnnotationOpenMPIVersion value that selects it
	// among the implementations sharing its Trainer value; the first entry
	// of a Trainer value is its default.
	openMPIVersion string
	// slotsSeparator joins a host and its slot count in the hostfile:
	// Open MPI "host slots=N", Hydra "host:N".
	slotsSeparator string
	// shortHostNames: it resolves peers by their short host name (Hydra
	// passes gethostname() around), so pods need the job's subdomain in
	// their DNS search path.
	shortHostNames bool
	// forwardsAll: the launcher passes its whole environment to remote
	// ranks (Hydra); otherwise Torus lists the job's variables in
	// envOMPIEnvList, as Open MPI forwards only OMPI_* unless told.
	forwardsAll bool
	// env is the launcher's environment: where the hostfile is, the slots
	// per host, and the ssh arguments.
	env func(slots, ssh string) []corev1.EnvVar
	// defaults are launcher settings a job's own environment overrides.
	defaults []corev1.EnvVar
	// agentEnv names the variable giving the launcher the program it
	// starts remote daemons with in place of ssh (Torus's client, with
	// the launch agent).
	agentEnv string
}

var table = []facts{
	{
		impl: OpenMPI, display: "Open MPI 4", cliNames: []string{"openmpi", "openmpi4"}, runtime: "torus-openmpi",
		agentEnv: envOMPIRSHAgent,
		trainer:  trainer.MPIImplementationOpenMPI, openMPIVersion: "4", slotsSeparator: " slots=",
		env: func(slots, ssh string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: EnvOMPIHostfile, Value: HostfilePath},
				{Name: envOMPIKeepFQDN, Value: "true"},
				{Name: envOMPIDefaultSlots, Value: slots},
				{Name: EnvOMPIRSHArgs, Value: ssh},
			}
		},
		// Pods run under the container runtime's default seccomp profile
		// (restricted-v2 and Pod Security's restricted demand it), which
		// refuses process_vm_readv without CAP_SYS_PTRACE: the shared
		// memory transport's single copy (CMA) then fails every large
		// message between ranks of one pod ("Read -1, expected N, errno
		// = 1"). Copying through the shared segment needs no privilege.
		defaults: []corev1.EnvVar{{Name: envOMPIVaderSingleCopy, Value: "none"}},
	},
	{
		impl: OpenMPI5, display: "Open MPI 5", cliNames: []string{"openmpi5"}, runtime: "torus-openmpi5",
		agentEnv: envPRTESSHAgent,
		trainer:  trainer.MPIImplementationOpenMPI, openMPIVersion: "5", slotsSeparator: " slots=",
		env: func(_, ssh string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: envPRTEHostfile, Value: HostfilePath},
				{Name: envPRTEKeepFQDN, Value: "1"},
				{Name: envPRTESSHArgs, Value: ssh},
			}
		},
	},
	{
		impl: IntelMPI, display: "Intel MPI", cliNames: []string{"intel", "intelmpi"}, runtime: "torus-intelmpi",
		agentEnv: envIntelBootstrapExec,
		trainer:  trainer.MPIImplementationIntel, slotsSeparator: ":", shortHostNames: true, forwardsAll: true,
		env: func(slots, ssh string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: envIntelHostfile, Value: HostfilePath},
				{Name: envIntelBootstrap, Value: "ssh"},
				{Name: envIntelBootstrapArg, Value: ssh},
				{Name: envIntelPerHost, Value: slots},
			}
		},
	},
	{
		impl: MPICH, display: "MPICH", cliNames: []string{"mpich"}, runtime: "torus-mpich",
		agentEnv: envHydraLauncherExec,
		trainer:  trainer.MPIImplementationMPICH, slotsSeparator: ":", shortHostNames: true, forwardsAll: true,
		env: func(_, ssh string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: envHydraHostfile, Value: HostfilePath},
				{Name: envHydraLauncher, Value: "ssh"},
				{Name: EnvHydraLaunchArgs, Value: ssh},
			}
		},
	},
}

// Implementations lists every implementation Torus supports, in the order
// users see them.
var Implementations = func() []Implementation {
	out := make([]Implementation, len(table))
	for i, f := range table {
		out[i] = f.impl
	}
	return out
}()

// CLINames are the canonical --mpi spellings of Implementations, in their
// order.
func CLINames() []string {
	out := make([]string, len(table))
	for i, f := range table {
		out[i] = f.cliNames[0]
	}
	return out
}

// RuntimeNames are the default runtimes of Implementations, in their order.
func RuntimeNames() []string {
	out := make([]string, len(table))
	for i, f := range table {
		out[i] = f.runtime
	}
	return out
}

// lookup is the implementation's entry, nil for an unknown one.
func (i Implementation) lookup() *facts {
	for k := range table {
		if table[k].impl == i {
			return &table[k]
		}
	}
	return nil
}

// of is the implementation's entry; anything unknown is Open MPI 4, the
// Trainer API's default.
func (i Implementation) of() *facts {
	if f := i.lookup(); f != nil {
		return f
	}
	return &table[0]
}

// ParseImplementation reads the plugin's --mpi flag value.
func ParseImplementation(s string) (Implementation, error) {
	var names []string
	for _, f := range table {
		for _, n := range f.cliNames {
			if strings.EqualFold(s, n) {
				return f.impl, nil
			}
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return "", fmt.Errorf("unknown MPI implementation %q: use one of %s", s, strings.Join(names, ", "))
}

// CLIName is the canonical --mpi spelling of the implementation.
func (i Implementation) CLIName() string { return i.of().cliNames[0] }

// DisplayName is the name people know the implementation by ("Open MPI
// 5"); an unknown one is shown as it is spelled.
func (i Implementation) DisplayName() string {
	if f := i.lookup(); f != nil {
		return f.display
	}
	return string(i)
}

// RuntimeName is the ClusterTrainingRuntime shipped in samples/ for the
// implementation; the plugin picks it when --runtime is not given.
func (i Implementation) RuntimeName() string { return i.of().runtime }

// TrainerValue is the value of mlPolicy.mpi.mpiImplementation for the
// implementation.
func (i Implementation) TrainerValue() trainer.MPIImplementation { return i.of().trainer }

// NeedsSearchDomain reports whether the implementation resolves peers by
// their short host name, so pods need the job's subdomain in their DNS
// search path.
func (i Implementation) NeedsSearchDomain() bool { return i.of().shortHostNames }

// VersionSelector is the annotation, and its value, with which a job
// selects the implementation among those sharing its Trainer value (Open
// MPI 4 and 5), or "" for one that shares it with none (or is unknown).
func (i Implementation) VersionSelector() (key, value string) {
	if f := i.lookup(); f != nil && f.openMPIVersion != "" {
		return api.AnnotationOpenMPIVersion, f.openMPIVersion
	}
	return "", ""
}

// IsTrainerDefault reports whether the implementation is what its Trainer
// value means on a runtime and job that select no version.
func (i Implementation) IsTrainerDefault() bool {
	f := i.of()
	for k := range table {
		if table[k].trainer == f.trainer {
			return &table[k] == f
		}
	}
	return true
}

// SelectOn records in a job's annotations (a non-nil map) that it runs the
// implementation on a runtime that runs other, and reports false when no
// annotation can (they differ in their Trainer value).
func (i Implementation) SelectOn(annotations map[string]string, other Implementation) bool {
	if i == other {
		return true
	}
	key, value := i.VersionSelector()
	if key == "" || i.TrainerValue() != other.TrainerValue() {
		return false
	}
	annotations[key] = value
	return true
}

// ResolveImplementation maps the Trainer API value and the Open MPI version
// annotation to an Implementation. An empty value means OpenMPI, as the CRD
// defaults it. Annotation sources are consulted in order; the first that
// sets api.AnnotationOpenMPIVersion wins (pass the TrainJob's before the
// runtime's).
func ResolveImplementation(v trainer.MPIImplementation, annotations ...map[string]string) (Implementation, error) {
	if v == "" {
		v = trainer.MPIImplementationOpenMPI
	}
	var candidates []*facts
	var known []string
	for k := range table {
		f := &table[k]
		if f.trainer == v {
			candidates = append(candidates, f)
		}
		if !slices.Contains(known, string(f.trainer)) {
			known = append(known, string(f.trainer))
		}
	}
	switch {
	case len(candidates) == 0:
		return "", fmt.Errorf("mpiImplementation %q is not supported: use %s", v, orList(known))
	case len(candidates) == 1:
		return candidates[0].impl, nil
	}
	for _, a := range annotations {
		ver, ok := a[api.AnnotationOpenMPIVersion]
		if !ok {
			continue
		}
		versions := make([]string, len(candidates))
		for k, f := range candidates {
			if f.openMPIVersion == ver {
				return f.impl, nil
			}
			versions[k] = strconv.Quote(f.openMPIVersion)
		}
		return "", fmt.Errorf("annotation %s=%q: set it to %s", api.AnnotationOpenMPIVersion, ver, orList(versions))
	}
	return candidates[0].impl, nil
}

// orList joins choices as a sentence does: "a, b or c".
func orList(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}
