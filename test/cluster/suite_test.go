// Package cluster proves the local cluster's start-up (test/localcluster) the
// way a new user meets it: it comes up while other processes crowd the
// ephemeral ports, every component it reports as up is alive, a
// component that dies is named with the end of its log (by `up` and by
// `status`), and `down` leaves no process behind.
//
//	make build testbin && go test ./test/cluster/ -ginkgo.v
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/framework"
)

// The test binary doubles as the process that crowds the ports: with
// TORUS_PORT_PRESSURE set it runs pressure() until killed.
func TestMain(m *testing.M) {
	if os.Getenv("TORUS_PORT_PRESSURE") != "" {
		if err := pressure(); err != nil {
			fmt.Fprintln(os.Stderr, "port pressure:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Local cluster start-up")
}

var (
	root     string
	testbin  string
	operator string
	// clusterBin is test/localcluster, built once for the suite.
	clusterBin string
)

var _ = BeforeSuite(func() {
	root = framework.RepoRoot()
	testbin = filepath.Join(root, ".testbin", "bin")
	if v := os.Getenv("TESTBIN"); v != "" {
		testbin = filepath.Join(v, "bin")
	}
	operator = filepath.Join(root, "bin", "torus-operator")
	for _, b := range []string{filepath.Join(testbin, "kube-apiserver"), filepath.Join(testbin, "kueue"), operator} {
		_, err := os.Stat(b)
		Expect(err).NotTo(HaveOccurred(), "%s is missing: run make build testbin", b)
	}
	clusterBin = filepath.Join(GinkgoT().TempDir(), "cluster")
	cmd := exec.Command("go", "build", "-o", clusterBin, "./test/localcluster")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building test/localcluster: %s", out)
})
