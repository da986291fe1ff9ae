package list

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/run"
)

func TestJobTable(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	running := run.BuildTrainJob(run.Spec{Name: "pi", Namespace: "ns", Workers: ptr.To[int32](4), Queue: "team"})
	running.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Minute))
	running.Status.Conditions = []metav1.Condition{{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobSetCreated", LastTransitionTime: metav1.NewTime(now.Add(-299 * time.Second))}, {Type: "Admitted", Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: metav1.NewTime(now.Add(-270 * time.Second))}, {Type: "Running", Status: metav1.ConditionTrue, Reason: "Running", Message: "Launcher running, 4/4 workers ready", LastTransitionTime: metav1.NewTime(now.Add(-4 * time.Minute))}}
	running.Status.JobsStatus = []trainer.JobStatus{{Name: mpi.NodeJob, Ready: ptr.To[int32](4)}, {Name: mpi.LauncherJob, Ready: ptr.To[int32](1)}}
	// Reported 30 s ago with 10 minutes left: 9m30s left now.
	running.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](600), LastUpdatedTime: metav1.NewTime(now.Add(-30 * time.Second))}
	unknown := run.BuildTrainJob(run.Spec{Name: "old", Namespace: "ns"})
	unknown.CreationTimestamp = metav1.NewTime(now.Add(-48 * time.Hour))

	infos := []*job.Info{
		{TrainJob: running, Job: &mpi.Job{Implementation: mpi.IntelMPI, Workers: 4, SlotsPerHost: 8}},
		{TrainJob: unknown},
	}
	var out bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: true}).PrintObj(jobTable(infos, now), &out); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		got = append(got, strings.Fields(l))
	}
	want := [][]string{
		{"NAME", "STATE", "WORKERS", "SLOTS", "RESTARTS", "PROGRESS", "TIME", "LEFT", "QUEUE", "DURATION", "AGE", "MPI", "RUNTIME", "IN", "STATE", "MESSAGE"},
		{"pi", "Running", "4/4", "32", "0", "42%", "9m30s", "team", "4m30s", "5m", "Intel", "torus-openmpi", "4m", "Launcher", "running,", "4/4", "workers", "ready"},
		{"old", "Creating", "0/0", "<unknown>", "0", "<none>", "<none>", "<none>", "<none>", "2d", "<unknown>", "torus-openmpi", "2d", "Waiting", "for", "the", "Torus", "operator", "to", "create", "the", "job's", "JobSet,", "and", "the", "JobSet", "controller", "to", "start", "it"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want,+got):\n%s", diff)
	}
}

// A running job that is probably stuck says so in the message column, in
// place of its Running message.
func TestJobTableStalled(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tj := run.BuildTrainJob(run.Spec{Name: "hang", Namespace: "ns"})
	tj.Status.Conditions = []metav1.Condition{
		{Type: "Running", Status: metav1.ConditionTrue, Reason: "Running", Message: "Launcher running", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
		{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "QuietAfterFailure", Message: "Probably stuck: rank 1 raised RuntimeError", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))},
	}
	var out bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: true}).PrintObj(jobTable([]*job.Info{{TrainJob: tj}}, now), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Probably stuck: rank 1 raised RuntimeError") || strings.Contains(out.String(), "Launcher running") {
		t.Errorf("the wide table does not say the job is stuck:\n%s", out.String())
	}
}
