package metricsauth_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var (
	env       *envtest.Environment
	cfg       *rest.Config
	clientset *kubernetes.Clientset
	ctx       = context.Background()
)

func TestMetricsAuth(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Metrics endpoint authentication and authorization")
}

// A bare API server is enough: the filter only sends TokenReviews and
// SubjectAccessReviews, which the API server answers with its own token
// authenticator and RBAC.
var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(), "run `make test-integration`, which builds etcd and kube-apiserver into .testbin/bin")
	env = &envtest.Environment{}
	var err error
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
