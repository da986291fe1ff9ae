package webhook_test

import (
	"context"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	fw  = framework.Suite(controller.Options{})
	ctx = context.Background()
)

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission webhooks and samples integration")
}

// discoveryMapper maps kinds as the API server serves them now; Reset makes
// it see kinds served since.
func discoveryMapper() *restmapper.DeferredDiscoveryRESTMapper {
	GinkgoHelper()
	dc, err := discovery.NewDiscoveryClientForConfig(fw.Config)
	Expect(err).NotTo(HaveOccurred())
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}
