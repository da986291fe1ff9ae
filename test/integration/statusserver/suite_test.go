package statusserver_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	env       *envtest.Environment
	cfg       *rest.Config
	k8s       client.Client
	clientset *kubernetes.Clientset
	ctx       = context.Background()
)

func TestStatusServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "TrainJob status endpoint")
}

// The API server decides who a token is (TokenReview of tokens it issued
// for pods, with their audiences) and keeps the TrainJobs, their JobSets,
// Jobs and pods; no controller runs: the specs make the chain of owners a
// job's pods have.
var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(), "run `make test-integration`, which builds etcd and kube-apiserver into .testbin/bin")
	env = &envtest.Environment{CRDDirectoryPaths: framework.CRDPaths(), ErrorIfCRDPathMissing: true}
	var err error
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
