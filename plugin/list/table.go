// Package list is kubectl mpi list: MPI jobs as a table, or as objects.
package list

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/printers"
)

// jobTable is the table of kubectl mpi list: NAME, STATE, WORKERS
// (ready/total), SLOTS (MPI ranks), RESTARTS (of the whole MPI world),
// PROGRESS and TIME LEFT (as the program reports them), QUEUE, DURATION,
// AGE, and with -o wide the MPI
// implementation, runtime, time in state and the state's message.
func jobTable(infos []*job.Info, now time.Time) *metav1.Table {
	t := &metav1.Table{
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name"},
			{Name: "State", Type: "string"},
			{Name: "Workers", Type: "string", Description: "ready/total"},
			{Name: "Slots", Type: "integer", Description: "MPI ranks (world size)"},
			{Name: "Restarts", Type: "integer", Description: "restarts of the job's whole MPI world"},
			{Name: "Progress", Type: "string", Description: "the training's progress, as its program last reported it (status.trainerStatus)"},
			{Name: "Time Left", Type: "string", Description: "the program's last estimate of the time left, counted down since it reported it, while the job runs"},
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
		sum := job.Summarize(info, now)
		slots := "<unknown>"
		if sum.Workers > 0 {
			slots = fmt.Sprint(sum.Slots)
		}
		queue := sum.Queue
		if queue == "" {
			queue = "<none>"
		}
		impl := sum.Implementation
		if impl == "" {
			impl = "<unknown>"
		}
		// A job that runs but is probably stuck says so first.
		msg := sum.State.Message
		if sum.State.Stalled != "" {
			msg = sum.State.Stalled
		}
		progress, left := sum.Progress.Text()
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{
				sum.Name, sum.State.Phase,
				fmt.Sprintf("%d/%d", sum.Ready, sum.Workers),
				slots, sum.Restarts, orNone(progress), orNone(left), queue, jobDuration(sum.Duration), printers.Age(sum.Created, now),
				impl, sum.Runtime, printers.Age(sum.State.Since, now), printers.Truncate(msg, 100),
			},
			Object: runtime.RawExtension{Object: info.TrainJob},
		})
	}
	return t
}

// jobDuration renders how long a job ran as kubectl get jobs does ("<none>"
// for a job not started).
func jobDuration(d *time.Duration) string {
	if d == nil {
		return "<none>"
	}
	return duration.HumanDuration(*d)
}

// orNone shows an unknown value as kubectl does.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
