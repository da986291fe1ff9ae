package wire_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// toolchain is one MPI implementation as a container image would hold it.
// Debian installs Open MPI and MPICH side by side and points the generic
// names (mpirun, mpicc) at one of them through alternatives, so each
// toolchain gets its own bin directory, first on its pods' PATH, in which
// the generic names resolve to its own implementation-specific binaries.
type toolchain struct {
	// name is how specs call it.
	name string
	// runtime is the ClusterTrainingRuntime in samples/runtimes/.
	runtime string
	// short prefixes TrainJob names, which become host names.
	short string
	// mpicc compiles the test program against this implementation.
	mpicc string
	// commands are the image's generic command names and their targets.
	commands map[string]string
	// library starts the implementation's MPI_Get_library_version.
	library string
	// sshArgsEnv is the launcher variable through which the operator hands
	// the implementation its ssh arguments.
	sshArgsEnv string
	// hangsWhenSSHFails says the launcher never ends by itself when ssh to
	// a worker fails: Hydra (MPICH 4.0) keeps waiting for the proxy that
	// ssh was to start. A job in that state runs into its deadline.
	hangsWhenSSHFails bool

	// binDir and program are set when the image is built.
	binDir  string
	program string
}

// toolchains are the implementations the wire test runs. Intel MPI is not
// among them: see debianPackages.
var toolchains = []*toolchain{
	{
		name:    "Open MPI",
		runtime: "torus-openmpi",
		short:   "ompi",
		mpicc:   "/usr/bin/mpicc.openmpi",
		// mpirun starts orted on each worker by running plain `orted`
		// through ssh, found on the PATH sshd gives the session, where
		// /usr/bin/orted is Open MPI's only daemon; the link here serves
		// the launcher's own PATH.
		commands: map[string]string{
			"mpirun":  "/usr/bin/mpirun.openmpi",
			"mpiexec": "/usr/bin/mpiexec.openmpi",
			"orted":   "/usr/bin/orted",
		},
		library:    "Open MPI",
		sshArgsEnv: mpi.EnvOMPIRSHArgs,
	},
	{
		name:    "MPICH",
		runtime: "torus-mpich",
		short:   "mpich",
		mpicc:   "/usr/bin/mpicc.mpich",
		// Hydra starts "<directory mpirun was found in>/hydra_pmi_proxy"
		// on each worker, so the proxy must sit next to mpirun here.
		commands: map[string]string{
			"mpirun":          "/usr/bin/mpirun.mpich",
			"mpiexec":         "/usr/bin/mpiexec.mpich",
			"hydra_pmi_proxy": "/usr/bin/hydra_pmi_proxy",
		},
		library:           "MPICH",
		sshArgsEnv:        mpi.EnvHydraLaunchArgs,
		hangsWhenSSHFails: true,
	},
}

// imagePath is the PATH every pod's processes get: the toolchain's
// directory first, then the usual system directories.
func (tc *toolchain) imagePath() string {
	return tc.binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}

// buildImage lays out each toolchain's bin directory under dir and compiles
// the test program with its mpicc. Everything is world-readable: the pods
// run as an unprivileged user.
func buildImage(ctx context.Context, dir, source string) error {
	for _, tc := range toolchains {
		tc.binDir = filepath.Join(dir, tc.short, "bin")
		if err := os.MkdirAll(tc.binDir, 0o755); err != nil {
			return fmt.Errorf("creating the %s image: %w", tc.name, err)
		}
		for name, target := range tc.commands {
			if _, err := os.Stat(target); err != nil {
				return fmt.Errorf("%s: %w", tc.name, err)
			}
			if err := os.Symlink(target, filepath.Join(tc.binDir, name)); err != nil {
				return fmt.Errorf("%s: linking %s: %w", tc.name, name, err)
			}
		}
		tc.program = filepath.Join(dir, tc.short, "ranks")
		if _, err := runFor(ctx, time.Minute, nil, tc.mpicc, "-O2", "-Wall", "-o", tc.program, source); err != nil {
			return fmt.Errorf("compiling %s with %s: %w", source, tc.name, err)
		}
	}
	return nil
}
