// Package wire_test proves that what the Torus operator generates launches
// MPI ranks across separate network hosts with real Open MPI, real MPICH and
// real OpenSSH.
//
// A real API server and the real Torus operator turn TrainJobs on the sample
// runtimes into a JobSet and a Secret (SSH keys and hostfile). The test
// then plays kubelet with exactly those objects: every pod becomes a network
// namespace on a private bridge, and every process in it gets a mount
// namespace with the pod's volumes and a UTS namespace with the pod's host
// name. The init container's own script fills the SSH directory, the workers
// run the runtime's sshd command, and the launcher runs its mpirun command
// with nothing but the environment the operator set.
//
// Intel MPI is not tested here: it cannot be installed from Debian's packages (see
// debianPackages).
//
// The suite needs root and skips without it.
package wire_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	fw = &framework.Framework{}

	// sandbox is where the suite keeps its files.
	sandbox struct {
		// root is the suite's temporary directory.
		root string
		// image holds what the pods' image would: the toolchains' bin
		// directories and the compiled test programs.
		image string
		// jobs holds every pod's volumes; pods never see it.
		jobs string
		// machine records directories made outside root.
		machine machineDirs
	}
)

func TestWire(t *testing.T) {
	if os.Geteuid() != 0 {
		if framework.RootTiersRequired() {
			t.Fatalf("the wire test needs root, and %s=1 requires it to run", framework.EnvRequireRootTiers)
		}
		t.Skip("the wire test needs root: it installs Debian packages, creates network, mount and UTS " +
			"namespaces and runs the pods' processes as their user; run it as root, e.g. " +
			"sudo env PATH=\"$PATH\" KUBEBUILDER_ASSETS=$PWD/.testbin/bin go test ./test/wire/")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "MPI over real ssh between network namespaces")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	// Fail before installing anything when the control plane is missing.
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must point at etcd and kube-apiserver (.testbin/bin; hack/testbin/build.sh etcd kube-apiserver builds them)")

	By("installing openssh-server, Open MPI, MPICH and gcc where missing")
	Expect(ensurePackages(ctx)).To(Succeed())
	Expect(removeStaleNamespaces(ctx)).To(Succeed(), "removing what killed runs left behind")

	root, err := os.MkdirTemp("", "torus-wire-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(errors.Join(
			removeOwnNamespaces(ctx),
			sandbox.machine.removeAll(),
			os.RemoveAll(root),
		)).To(Succeed(), "cleaning up the sandbox")
	}, NodeTimeout(time.Minute))
	// The pods' unprivileged user must reach the programs.
	Expect(os.Chmod(root, 0o755)).To(Succeed())
	sandbox.root = root
	sandbox.image = filepath.Join(root, "image")
	sandbox.jobs = filepath.Join(root, "jobs")
	// Bind mounts need no access to their source, so the pods' volumes,
	// keys included, can be root's alone on the machine.
	Expect(os.Mkdir(sandbox.jobs, 0o700)).To(Succeed())

	By("compiling the test program with each implementation's mpicc")
	source, err := filepath.Abs(filepath.Join("testdata", "ranks.c"))
	Expect(err).NotTo(HaveOccurred())
	Expect(buildImage(ctx, sandbox.image, source)).To(Succeed())

	By("starting the API server and the Torus operator")
	fw.Init()
	DeferCleanup(fw.Teardown)
	// Containers here are processes on the machine's own file system,
	// where Torus's image, which launchers wait from, is not: the
	// operator starts launchers once their workers are Ready, and their
	// SSH setup waits for the hosts itself (the cluster suite runs the
	// wait from Torus's image on the real nodes).
	fw.NoLaunchImage = true
	fw.StartManager(controller.Options{})

	By("installing the sample runtimes, as a cluster admin would")
	for _, tc := range toolchains {
		var rt trainer.ClusterTrainingRuntime
		framework.DecodeFile(filepath.Join(framework.RepoRoot(), "samples", "runtimes", tc.runtime+".yaml"), &rt)
		Expect(fw.Client.Create(ctx, &rt)).To(Succeed(), "creating runtime %s", tc.runtime)
	}
}, NodeTimeout(14*time.Minute))
