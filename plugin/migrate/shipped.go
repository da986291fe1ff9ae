package migrate

import (
	"sync"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/samples"
)

// shippedCache holds the decoded shipped runtimes by name: reuse mode
// compares every job with one.
var shippedCache sync.Map

// shippedRuntimeNamed decodes, once, the ClusterTrainingRuntime Torus
// ships under that name (samples/runtimes). Callers must not modify it.
func shippedRuntimeNamed(name string) (*trainer.ClusterTrainingRuntime, error) {
	if rt, ok := shippedCache.Load(name); ok {
		return rt.(*trainer.ClusterTrainingRuntime), nil
	}
	rt, err := samples.Runtime(name)
	if err != nil {
		return nil, err
	}
	actual, _ := shippedCache.LoadOrStore(name, rt)
	return actual.(*trainer.ClusterTrainingRuntime), nil
}

// shippedRuntime is the ClusterTrainingRuntime Torus ships for an
// implementation; reuse mode refers TrainJobs to it when it expresses them.
func shippedRuntime(impl mpi.Implementation) (*trainer.ClusterTrainingRuntime, error) {
	return shippedRuntimeNamed(impl.RuntimeName())
}
