package job

import (
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// Summary is a job as one row of kubectl mpi list and of the dashboard's
// list of jobs: both show the same fields, computed once here.
type Summary struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	State     trainjob.State `json:"state"`
	Ready     int32          `json:"readyWorkers"`
	Workers   int32          `json:"workers"`
	// Slots is the MPI world size; 0 when the runtime is unknown.
	Slots int32 `json:"slots"`
	// Restarts is how many times the job restarted its MPI world, Kueue's
	// evictions included.
	Restarts       int32  `json:"restarts"`
	Queue          string `json:"queue,omitempty"`
	Implementation string `json:"implementation,omitempty"`
	Runtime        string `json:"runtime"`
	// Duration is how long the job has run since it last started, until it
	// ended or now; nil for a job not started.
	Duration *time.Duration `json:"duration,omitempty"`
	Created  time.Time      `json:"created"`
	// Owner is who created the job, as Torus's admission recorded it; ""
	// for a job it did not see created.
	Owner string `json:"owner,omitempty"`
}

// Summarize computes a job's row as of now.
func Summarize(info *Info, now time.Time) Summary {
	tj := info.TrainJob
	s := Summary{
		Namespace: tj.Namespace, Name: tj.Name,
		State:          trainjob.StateOf(tj),
		Ready:          readyWorkers(tj),
		Workers:        info.Workers(),
		Queue:          tj.Labels[mpi.KueueQueueLabel],
		Implementation: string(info.Implementation()),
		Runtime:        RuntimeName(tj),
		Created:        tj.CreationTimestamp.Time,
		Owner:          tj.Annotations[api.AnnotationCreatedBy],
		Restarts:       trainjob.RestartsOf(tj).Stops(),
	}
	if s.Workers > 0 {
		s.Slots = info.Placement().Size()
	}
	if d, ok := trainjob.TimesOf(tj).Duration(now); ok {
		s.Duration = &d
	}
	return s
}

func readyWorkers(tj *trainer.TrainJob) int32 {
	for _, s := range tj.Status.JobsStatus {
		if s.Name == mpi.NodeJob {
			return ptr.Deref(s.Ready, 0)
		}
	}
	return 0
}

// RuntimeName names a job's runtime as kubectl mpi run takes it: a
// ClusterTrainingRuntime by its name, others as Kind/name.
func RuntimeName(tj *trainer.TrainJob) string {
	kind := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
	if kind == trainer.ClusterTrainingRuntimeKind {
		return tj.Spec.RuntimeRef.Name
	}
	return kind + "/" + tj.Spec.RuntimeRef.Name
}
