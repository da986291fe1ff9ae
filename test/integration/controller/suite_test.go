package controller_test

import (
	"context"
	"testing"

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

func TestController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "TrainJob controller integration")
}

var _ = BeforeSuite(func() {
	fw.Init()
	fw.StartManager(controller.Options{})
	k8sClient = fw.Client
	framework.CreateSampleRuntimes(ctx, k8sClient)
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
