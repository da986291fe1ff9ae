// Package plugin_test runs kubectl mpi's commands in-process against a real
// API server with the Trainer, JobSet and Kueue CRDs, Torus's webhooks and
// its controllers (envtest): what the API side decides (schema, webhooks,
// the operator's conditions) as the commands show it. Pods, logs and exec
// need the local cluster: test/e2e/plugin_*_test.go.
package plugin_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/plugin/app"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	fw         = &framework.Framework{}
	k8sClient  client.Client
	ctx        = context.Background()
	kubeconfig string
)

func TestPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl mpi integration")
}

var _ = BeforeSuite(func() {
	fw.Init()
	fw.StartManager(controller.Options{})
	k8sClient = fw.Client
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "samples", "runtimes", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
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

func writeKubeconfig(dir string) string {
	cfg := fw.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	Expect(os.Chmod(path, 0o600)).To(Succeed())
	return path
}

type result struct {
	Stdout, Stderr string
	Code           int
	Err            error
}

// kubectlMPI runs kubectl mpi in-process, as a user's shell would.
func kubectlMPI(stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	cmd := app.NewCmd(flags, genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	r := result{Stdout: out.String(), Stderr: errOut.String(), Code: cmdutil.Code(err), Err: err}
	GinkgoWriter.Printf("$ kubectl mpi %s\n%s%s(exit %d: %v)\n", strings.Join(args, " "), r.Stdout, r.Stderr, r.Code, err)
	return r
}
