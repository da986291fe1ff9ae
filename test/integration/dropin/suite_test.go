package dropin_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/framework"
)

// The suite runs upstream Trainer's controller, then Torus, against one API
// server, so it starts its own managers rather than framework.Suite's.
var (
	fw  = &framework.Framework{}
	ctx = context.Background()
)

func TestDropIn(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Drop-in for Kubeflow Trainer")
}

var _ = BeforeSuite(func() { fw.Init() })

var _ = AfterSuite(func() { fw.Teardown() })
