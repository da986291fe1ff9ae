package controller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	// The JobSet controller does not run here: specs play its part
	// (framework.ObserveJobSet), or, with a short timeout, see Torus
	// report its silence.
	fw = framework.Suite(controller.Options{
		Settings:     controller.Settings{JobSetReportTimeout: jobSetReportTimeout},
		StatusServer: statusServer.Load,
	}, framework.SampleRuntimes)
	ctx = context.Background()
	// statusServer is where the status server is, as the operator's
	// locator would say: none, but while a spec sets it.
	statusServer atomic.Pointer[trainerstatus.Server]
)

const jobSetReportTimeout = 4 * time.Second

func TestController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "TrainJob controller integration")
}
