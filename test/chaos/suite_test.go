// Package chaos_test proves the operator under faults: the operator binary
// is killed with SIGKILL (by its PID) at random moments while TrainJobs are
// created and while they finish, on a real kube-apiserver and etcd, and
// afterwards every job has exactly its children, the finished jobs' keys
// are gone and every status is right.
package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/framework"
)

var (
	fw         = &framework.Framework{}
	ctx        = context.Background()
	kubeconfig string
	binary     string
	// keyNamespace is where the operator keeps its proof key.
	keyNamespace string
)

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Operator under faults")
}

var _ = BeforeSuite(func(sctx SpecContext) {
	binary = filepath.Join(framework.RepoRoot(), "bin", "torus-operator")
	_, err := os.Stat(binary)
	Expect(err).NotTo(HaveOccurred(), "build the operator first (make build; make test-chaos does)")
	fw.Init()
	kubeconfig = fw.WriteKubeconfig(GinkgoT().TempDir())
	keyNamespace = fw.NewNamespace(sctx, "torus-operator").Name
})

var _ = AfterSuite(fw.Teardown)
