// Package e2e runs MPI jobs on the local cluster (make cluster-up): a real
// kube-apiserver, controller-manager and scheduler, kwok nodes and pods, the
// JobSet and Kueue controllers and the Torus operator, all separate
// processes.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	k8sClient client.Client
	// restConfig reaches the cluster, for clients other than k8sClient.
	restConfig *rest.Config
	ctx        = context.Background()
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End to end on the local cluster")
}

var _ = BeforeSuite(func() {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(framework.RepoRoot(), ".cluster", "kubeconfig")
	}
	_, err := os.Stat(kubeconfig)
	Expect(err).NotTo(HaveOccurred(), "no local cluster: run `make test-e2e`, which starts one with `make cluster-up`")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 100, 200
	restConfig = cfg
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	installRuntimes()
})
