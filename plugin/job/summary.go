package job

import (
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
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
	// Progress is the program's last report; nil when it sent none.
	Progress *Progress `json:"progress,omitempty"`
}

// Progress is a program's last report (status.trainerStatus) as the
// screens show it.
type Progress struct {
	// Percent is how far the training is, 0 to 100; nil when not said.
	Percent *int32 `json:"percent,omitempty"`
	// LeftSeconds is the time left by the program's estimate, counted down
	// since it reported; nil when it gave none or the job does not run.
	LeftSeconds *int64           `json:"leftSeconds,omitempty"`
	Metrics     []trainer.Metric `json:"metrics,omitempty"`
	// Reported is when the operator took the report.
	Reported time.Time `json:"reported,omitzero"`
}

// ProgressOf is the job's last report as the screens show it, or nil: the
// time left only while the job runs.
func ProgressOf(tj *trainer.TrainJob, st trainjob.State, now time.Time) *Progress {
	rep := trainerstatus.Of(tj)
	if rep == nil {
		return nil
	}
	p := &Progress{Percent: rep.ProgressPercentage, Metrics: rep.Metrics, Reported: rep.LastUpdatedTime.Time}
	if left, ok := trainerstatus.Left(rep, now); ok && st.Phase == trainjob.PhaseRunning {
		p.LeftSeconds = ptr.To(int64(left / time.Second))
	}
	return p
}

// Text is the progress ("42%") and the time left as kubectl shows a
// duration ("9m30s"), each "" when not known.
func (p *Progress) Text() (percent, left string) {
	if p == nil {
		return "", ""
	}
	if p.Percent != nil {
		percent = fmt.Sprintf("%d%%", *p.Percent)
	}
	if p.LeftSeconds != nil {
		left = duration.HumanDuration(time.Duration(*p.LeftSeconds) * time.Second)
	}
	return percent, left
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
	s.Progress = ProgressOf(tj, s.State, now)
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
