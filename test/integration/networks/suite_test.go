package networks_test

import (
	"context"
	"path/filepath"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	fw        = &framework.Framework{}
	k8sClient client.Client
	ctx       = context.Background()
)

func TestNetworks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "InfiniBand/RoCE network profiles integration")
}

var _ = BeforeSuite(func() {
	fw.Init()
	fw.StartManager(controller.Options{})
	k8sClient = fw.Client
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "samples", "runtimes", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, f := range files {
		var rt trainer.ClusterTrainingRuntime
		framework.DecodeFile(f, &rt)
		Expect(k8sClient.Create(ctx, &rt)).To(Succeed())
	}
})

var _ = AfterSuite(func() { fw.Teardown() })
