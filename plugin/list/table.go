// Package list is kubectl mpi list: MPI jobs as a table, or as objects.
package list

import (
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/printers"
)

// jobTable is the table of kubectl mpi list: NAME, STATE, WORKERS
// (ready/total), SLOTS (MPI ranks), QUEUE, DURATION, AGE, and with -o wide the MPI
// implementation, runtime, time in state and the state's message.
func jobTable(infos []*job.Info, now time.Time) *metav1.Table {
	t := &metav1.Table{
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name"},
			{Name: "State", Type: "string"},
			{Name: "Workers", Type: "string", Description: "ready/total"},
			{Name: "Slots", Type: "integer", Description: "MPI ranks (world size)"},
			{Name: "Queue", Type: "string"},
			{Name: "Duration", Type: "string", Description: "time run since the job last started (Kueue's admission, a resume or its creation) until it ended or now"},
			{Name: "Age", Type: "string"},
			{Name: "MPI", Type: "string", Priority: 1},
			{Name: "Runtime", Type: "string", Priority: 1},
			{Name: "In State", Type: "string", Priority: 1},
			{Name: "Message", Type: "string", Priority: 1},
		},
	}
	for _, info := range infos {
		tj := info.TrainJob
		st := trainjob.StateOf(tj)
		workers := info.Workers()
		slots := "<unknown>"
		if workers > 0 {
			slots = fmt.Sprint(info.Placement().Size())
		}
		queue := tj.Labels[mpi.KueueQueueLabel]
		if queue == "" {
			queue = "<none>"
		}
		impl := string(info.Implementation())
		if impl == "" {
			impl = "<unknown>"
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{
				tj.Name, st.Phase,
				fmt.Sprintf("%d/%d", readyWorkers(tj), workers),
				slots, queue, jobDuration(trainjob.TimesOf(tj), now), printers.Age(tj.CreationTimestamp.Time, now),
				impl, runtimeName(tj), printers.Age(st.Since, now), printers.Truncate(st.Message, 100),
			},
			Object: runtime.RawExtension{Object: tj},
		})
	}
	return t
}

func readyWorkers(tj *trainer.TrainJob) int32 {
	for _, s := range tj.Status.JobsStatus {
		if s.Name == mpi.NodeJob {
			return ptr.Deref(s.Ready, 0)
		}
	}
	return 0
}

func runtimeName(tj *trainer.TrainJob) string {
	kind := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
	if kind == trainer.ClusterTrainingRuntimeKind {
		return tj.Spec.RuntimeRef.Name
	}
	return kind + "/" + tj.Spec.RuntimeRef.Name
}

// jobDuration renders how long a job ran as kubectl get jobs does ("<none>"
// for a job not started).
func jobDuration(t trainjob.Times, now time.Time) string {
	d, ok := t.Duration(now)
	if !ok {
		return "<none>"
	}
	return duration.HumanDuration(d)
}
