package webhook_test

import (
	"context"
	"testing"

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
