package mpi

import (
	"fmt"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
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

// Implementations lists every implementation Torus supports, in the order
// users see them.
var Implementations = []Implementation{OpenMPI, OpenMPI5, IntelMPI, MPICH}

// cliNames are the spellings of the plugin's --mpi flag.
var cliNames = map[string]Implementation{
	"openmpi":  OpenMPI,
	"openmpi4": OpenMPI,
	"openmpi5": OpenMPI5,
	"intel":    IntelMPI,
	"intelmpi": IntelMPI,
	"mpich":    MPICH,
}

// ParseImplementation reads the plugin's --mpi flag value.
func ParseImplementation(s string) (Implementation, error) {
	if impl, ok := cliNames[strings.ToLower(s)]; ok {
		return impl, nil
	}
	names := make([]string, 0, len(cliNames))
	for n := range cliNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return "", fmt.Errorf("unknown MPI implementation %q: use one of %s", s, strings.Join(names, ", "))
}

// CLIName is the canonical --mpi spelling of the implementation.
func (i Implementation) CLIName() string {
	switch i {
	case OpenMPI5:
		return "openmpi5"
	case IntelMPI:
		return "intel"
	case MPICH:
		return "mpich"
	default:
		return "openmpi"
	}
}

// RuntimeName is the ClusterTrainingRuntime shipped in samples/ for the
// implementation; the plugin picks it when --runtime is not given.
func (i Implementation) RuntimeName() string {
	switch i {
	case OpenMPI5:
		return "torus-openmpi5"
	case IntelMPI:
		return "torus-intelmpi"
	case MPICH:
		return "torus-mpich"
	default:
		return "torus-openmpi"
	}
}

// TrainerValue is the value of mlPolicy.mpi.mpiImplementation for the
// implementation.
func (i Implementation) TrainerValue() trainer.MPIImplementation {
	switch i {
	case IntelMPI:
		return trainer.MPIImplementationIntel
	case MPICH:
		return trainer.MPIImplementationMPICH
	default:
		return trainer.MPIImplementationOpenMPI
	}
}

// ResolveImplementation maps the Trainer API value and the Open MPI version
// annotation to an Implementation. An empty value means OpenMPI, as the CRD
// defaults it. Annotation sources are consulted in order; the first that
// sets AnnotationOpenMPIVersion wins (pass the TrainJob's before the
// runtime's).
func ResolveImplementation(v trainer.MPIImplementation, annotations ...map[string]string) (Implementation, error) {
	switch v {
	case trainer.MPIImplementationIntel:
		return IntelMPI, nil
	case trainer.MPIImplementationMPICH:
		return MPICH, nil
	case trainer.MPIImplementationOpenMPI, "":
		for _, a := range annotations {
			ver, ok := a[AnnotationOpenMPIVersion]
			if !ok {
				continue
			}
			switch ver {
			case "4":
				return OpenMPI, nil
			case "5":
				return OpenMPI5, nil
			default:
				return "", fmt.Errorf("annotation %s=%q: set it to \"4\" or \"5\"", AnnotationOpenMPIVersion, ver)
			}
		}
		return OpenMPI, nil
	default:
		return "", fmt.Errorf("mpiImplementation %q is not supported: use %s, %s or %s",
			v, trainer.MPIImplementationOpenMPI, trainer.MPIImplementationIntel, trainer.MPIImplementationMPICH)
	}
}

// NeedsSearchDomain reports whether the implementation resolves peers by
// their short host name, so pods need the job's subdomain in their DNS
// search path. Hydra (Intel MPI, MPICH) passes gethostname() around.
func (i Implementation) NeedsSearchDomain() bool {
	return i == IntelMPI || i == MPICH
}
