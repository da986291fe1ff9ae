package describe

import (
	"context"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/job"
)

// View is what describe shows of a job, as data: the dashboard's job page
// reads it, so the page and the command never tell a job differently.
type View struct {
	job.Summary
	// Headline is what matters most, said first (the failing rank, the
	// cause and the fix; why the job waits).
	Headline     []Field `json:"headline,omitempty"`
	Image        string  `json:"image,omitempty"`
	Command      string  `json:"command,omitempty"`
	SlotsPerHost int32   `json:"slotsPerHost"`
	// MPI names the implementation as people do ("Open MPI 5").
	MPI   string    `json:"mpi,omitempty"`
	Hosts []HostRow `json:"hosts"`
	// Restarts is the job's record of its restarts.
	Restarts   trainjob.Restarts   `json:"restarts"`
	Conditions []metav1.Condition  `json:"conditions"`
	Events     []Event             `json:"events"`
	Findings   []diagnosis.Finding `json:"findings,omitempty"`
	// Problems are what could not be read (permissions).
	Problems []string `json:"problems,omitempty"`
}

// Event is one of the job's recent events.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  string    `json:"object"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
}

// Describe reads a job's runtime, pods and events and says what describe
// would; tables, when not nil, read a glance of its pods (job.GlancePods).
func Describe(ctx context.Context, c client.Reader, tables job.PodTables, tj *trainer.TrainJob, now time.Time) View {
	d := gather(ctx, c, tables, tj, now)
	placement := d.Info.Placement()
	findings := diagnosis.Pods(d.Pods, placement)
	v := View{
		Summary:      job.Summarize(d.Info, now),
		Headline:     headline(d, trainjob.StateOf(tj), findings),
		SlotsPerHost: d.Info.SlotsPerHost(),
		MPI:          d.Info.Implementation().DisplayName(),
		Hosts:        hostRows(d, placement, findings),
		Restarts:     trainjob.RestartsOf(tj),
		Conditions:   tj.Status.Conditions,
		Findings:     findings,
		Problems:     d.Problems,
		Events:       []Event{},
	}
	if t := tj.Spec.Trainer; t != nil {
		if t.Image != nil {
			v.Image = *t.Image
		}
		if cmd := append(append([]string{}, t.Command...), t.Args...); len(cmd) > 0 {
			v.Command = shellJoin(cmd)
		}
	}
	if v.Conditions == nil {
		v.Conditions = []metav1.Condition{}
	}
	for i := range d.Events {
		e := &d.Events[i]
		v.Events = append(v.Events, Event{Time: eventTime(e), Type: e.Type, Reason: e.Reason,
			Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Message: e.Message, Count: e.Count})
	}
	return v
}
