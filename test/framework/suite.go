package framework

import (
	"context"
	"os"
	"path/filepath"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/torus-mpi/torus/operator/controller"
)

// SuiteOption adds to what Suite sets up.
type SuiteOption int

const (
	// SampleRuntimes creates the shipped ClusterTrainingRuntimes.
	SampleRuntimes SuiteOption = iota
	// AdminKubeconfig writes an admin kubeconfig file, for commands run
	// the way a user runs them (Framework.Kubeconfig).
	AdminKubeconfig
)

// Suite registers an integration suite's BeforeSuite and AfterSuite: the
// API server with the CRDs and webhook configurations, the Torus manager
// with opts, and what the options add. Call it in a package-level var;
// the Framework's fields are set before the first spec runs.
func Suite(opts controller.Options, with ...SuiteOption) *Framework {
	f := &Framework{}
	ginkgo.BeforeSuite(func() {
		f.Init()
		f.StartManager(opts)
		for _, o := range with {
			switch o {
			case SampleRuntimes:
				CreateSampleRuntimes(context.Background(), f.Client)
			case AdminKubeconfig:
				f.Kubeconfig = f.WriteKubeconfig(ginkgo.GinkgoT().TempDir())
			}
		}
	})
	ginkgo.AfterSuite(f.Teardown)
	return f
}

// WriteKubeconfig writes the admin's credentials as a kubeconfig file, the
// way kubectl plugins are given a cluster.
func (f *Framework) WriteKubeconfig(dir string) string {
	ginkgo.GinkgoHelper()
	cfg := f.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	gomega.Expect(clientcmd.WriteToFile(*kc, path)).To(gomega.Succeed())
	gomega.Expect(os.Chmod(path, 0o600)).To(gomega.Succeed())
	return path
}
