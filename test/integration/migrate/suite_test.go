package migrate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	fw        = &framework.Framework{}
	k8sClient client.Client
	ctx       = context.Background()
	// kubeconfig is an admin's kubeconfig file for the test API server, for
	// running kubectl mpi migrate against it.
	kubeconfig string
)

func TestMigrate(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl mpi migrate integration")
}

var _ = BeforeSuite(func() {
	fw.Init()
	fw.StartManager(controller.Options{})
	k8sClient = fw.Client

	// The shipped ClusterTrainingRuntimes, which reuse mode refers to.
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "samples", "runtimes", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).NotTo(BeEmpty())
	for _, f := range files {
		for _, obj := range framework.ReadObjects(f) {
			Expect(k8sClient.Create(ctx, obj)).To(Succeed(), "creating %s from %s", obj.GetName(), f)
		}
	}

	kubeconfig = writeKubeconfig(GinkgoT().TempDir())
})

var _ = AfterSuite(func() {
	fw.Teardown()
})

// writeKubeconfig writes the framework's admin credentials as a kubeconfig
// file, the way kubectl plugins are given a cluster.
func writeKubeconfig(dir string) string {
	cfg := fw.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	Expect(os.Chmod(path, 0o600)).To(Succeed())
	return path
}
