// Package describe is kubectl mpi describe, which explains one MPI job: its
// state and for how long, why it waits or why it failed (the failing rank,
// the cause, the fix, in the first lines), a table of its ranks and pods,
// its conditions and recent events.
package describe

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/operatorstatus"
	"github.com/torus-mpi/torus/plugin/printers"
)

// maxEvents is how many of the latest events are shown.
const maxEvents = 15

// data is what describe shows.
type data struct {
	Info *job.Info
	// Pods are the job's pods read whole: all of them, or, from a glance
	// (job.GlancePods), those not plainly running.
	Pods []corev1.Pod
	// Glance is the rest of the job's hosts, when a glance read them.
	Glance *job.Glance
	Events []corev1.Event
	// Problems are what could not be read (permissions), said at the end.
	Problems []string
	// Operator is whether the Torus operator runs, for a job that is not
	// finished (zero, unknown, for one that is): a job waiting on a dead
	// operator is told from one waiting on a slow one.
	Operator operatorstatus.Status
}

// gather reads a job's runtime, pods and events, and for a job that has
// not finished whether the operator runs; now dates the operator's lease.
// With tables, it glances at the job's pods (job.GlancePods), unless the
// job selects a network profile: the Networks section reads each pod's
// attachments.
func gather(ctx context.Context, c client.Reader, tables job.PodTables, tj *trainer.TrainJob, now time.Time) *data {
	d := &data{Info: job.Resolve(ctx, job.NewRuntimes(c), tj)}
	if !trainjob.Finished(tj) {
		d.Operator = operatorstatus.Check(ctx, c, now)
	}
	if d.Info.RuntimeErr != nil {
		d.Problems = append(d.Problems, "runtime: "+d.Info.RuntimeErr.Error())
	}
	if d.Info.Runtime == nil || mpi.ProfileName(tj.Annotations, d.Info.Runtime.Annotations) != "" {
		tables = nil
	}
	glance, err := job.GlancePods(ctx, c, tables, tj)
	if err != nil {
		d.Problems = append(d.Problems, err.Error())
	} else {
		d.Pods, d.Glance = glance.Pods, glance
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(tj.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.name", tj.Name)}); err != nil {
		d.Problems = append(d.Problems, "events: "+err.Error())
	}
	for _, e := range events.Items {
		if k := e.InvolvedObject.Kind; k == trainer.TrainJobKind || k == "JobSet" {
			d.Events = append(d.Events, e)
		}
	}
	sort.SliceStable(d.Events, func(i, j int) bool { return eventTime(&d.Events[i]).Before(eventTime(&d.Events[j])) })
	if len(d.Events) > maxEvents {
		d.Events = d.Events[len(d.Events)-maxEvents:]
	}
	return d
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// write renders the description.
func write(w io.Writer, d *data, now time.Time) error {
	// Everything shown comes from the server: written by whoever may
	// write the job, its pods and its events.
	w = printers.Escaping(w)
	tj := d.Info.TrainJob
	st := trainjob.StateOf(tj)
	placement := d.Info.Placement()
	findings := diagnosis.Pods(d.Pods, placement)

	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	field := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t%s\n", name, fmt.Sprintf(format, args...))
	}
	field("Name", "%s", tj.Name)
	field("Namespace", "%s", tj.Namespace)
	state := st.Phase
	if !st.Since.IsZero() {
		state += fmt.Sprintf(" for %s (since %s)", printers.Age(st.Since, now), st.Since.UTC().Format(time.RFC3339))
	}
	field("State", "%s", state)

	for _, f := range headline(d, st, findings) {
		field(f.Name, "%s", f.Value)
	}
	if p := progress(tj, st, now); p != "" {
		field("Progress", "%s", p)
	}

	impl := "unknown"
	if i := d.Info.Implementation(); i != "" {
		impl = i.DisplayName()
	}
	workers, slots := d.Info.Workers(), d.Info.SlotsPerHost()
	launcher := "the launcher runs no ranks"
	if d.Info.Job != nil && d.Info.Job.LauncherRunsRanks {
		launcher = "the launcher runs ranks too"
	}
	field("MPI", "%s: %d workers × %d slots = %d ranks; %s", impl, workers, slots, placement.Size(), launcher)
	rt := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) + " " + tj.Spec.RuntimeRef.Name
	field("Runtime", "%s", rt)
	if t := tj.Spec.Trainer; t != nil {
		if t.Image != nil {
			field("Image", "%s", *t.Image)
		}
		if cmd := append(append([]string{}, t.Command...), t.Args...); len(cmd) > 0 {
			field("Command", "%s", shellJoin(cmd))
		}
		if r := t.ResourcesPerNode; r != nil {
			field("Per worker", "%s", resources(r))
		}
	}
	if q := tj.Labels[mpi.KueueQueueLabel]; q != "" {
		admission := ""
		if c := meta.FindStatusCondition(tj.Status.Conditions, trainjob.ConditionAdmitted); c != nil {
			admission = " (" + c.Reason + ")"
		}
		field("Queue", "%s%s", q, admission)
	}
	if v := tj.Annotations[api.AnnotationTopology]; v != "" {
		field("Topology", "%s", v)
	}
	if v := tj.Annotations[api.AnnotationNetworkProfile]; v != "" {
		field("Network", "%s", v)
	}
	if v := tj.Annotations[api.AnnotationRerunOf]; v != "" {
		field("Rerun of", "%s", v)
	}
	if v := tj.Annotations[api.AnnotationCreatedBy]; v != "" {
		field("Created by", "%s", v)
	}
	writeTimes(field, trainjob.TimesOf(tj), now)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nRanks:")
	if err := writeRanks(w, d, placement, findings); err != nil {
		return err
	}
	if err := writeNetworks(w, d, placement); err != nil {
		return err
	}
	if rec := trainjob.RestartsOf(tj); rec.Stops() > 0 {
		// Why each of the latest runs stopped, as the operator saw it.
		fmt.Fprintf(w, "\nRestarts: %d, %d counted against the budget of %d", rec.Total, rec.Counted, rec.Budget)
		if rec.Evictions > 0 {
			fmt.Fprintf(w, "; evicted by Kueue: %d", rec.Evictions)
		}
		fmt.Fprintln(w)
		for _, x := range rec.Latest {
			fmt.Fprintf(w, "  %s\n", x)
		}
	}

	fmt.Fprintln(w, "\nConditions:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range tj.Status.Conditions {
		// One line each: a message of several (Restarted) is joined.
		msg := strings.ReplaceAll(strings.TrimSpace(c.Message), "\n", "; ")
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, printers.Age(c.LastTransitionTime.Time, now), printers.Truncate(msg, 160))
	}
	if len(tj.Status.Conditions) == 0 {
		fmt.Fprintln(tw, "  <none>")
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nEvents:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if len(d.Events) == 0 {
		fmt.Fprintln(tw, "  <none>")
	} else {
		fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tOBJECT\tMESSAGE")
		for i := range d.Events {
			e := &d.Events[i]
			age := printers.Age(eventTime(e), now)
			if e.Count > 1 {
				age += fmt.Sprintf(" (x%d)", e.Count)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", age, e.Type, e.Reason, strings.ToLower(e.InvolvedObject.Kind)+"/"+e.InvolvedObject.Name, printers.Truncate(strings.TrimSpace(e.Message), 160))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Problems) > 0 {
		fmt.Fprintln(w, "\nNot shown:")
		for _, p := range d.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	return nil
}

// Field is one line of a description's head: a name and its value.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// headline is what matters most about a job, said first: for a failed job
// the failing rank, the cause and the fix; for a waiting one, why it waits;
// a warning when the operator is down.
func headline(d *data, st trainjob.State, findings []diagnosis.Finding) []Field {
	var out []Field
	field := func(name, format string, args ...any) {
		out = append(out, Field{Name: name, Value: fmt.Sprintf(format, args...)})
	}
	tj := d.Info.TrainJob
	switch st.Phase {
	case trainjob.PhaseFailed:
		// A job Torus stopped (its scheduling timeout, deadline or stall
		// timeout) failed for that, whatever its pods show while they go;
		// the message names what it waited for.
		f := firstTerminal(findings)
		if st.Reason == trainjob.ReasonSchedulingTimeout || st.Reason == trainjob.ReasonDeadlineExceeded || st.Reason == trainjob.ReasonStalled {
			f = nil
		}
		if f != nil {
			who := f.Host
			if f.Ranks != "" {
				who += " (" + f.Ranks + ")"
			}
			field("Failed rank", "%s, pod %s%s", who, f.Pod, nodeOf(d.Pods, f.Pod))
			field("Reason", "%s: %s", f.Reason, f.Detail)
			if len(f.Output) > 0 {
				field("Last output", "%s", f.Quote())
			}
			if f.Fix != "" {
				field("Fix", "%s", f.Fix)
			}
		} else {
			field("Reason", "%s", st.Message)
		}
	case trainjob.PhaseCreating:
		// Without the operator a new job never gets its JobSet: say so
		// rather than that it waits for the operator.
		if d.Operator.Down() {
			field("Waiting", "%s", d.Operator.Message())
			field("Fix", "%s", d.Operator.Fix())
		} else if st.Message != "" {
			field("Waiting", "%s", st.Message)
		}
	case trainjob.PhaseQueued, trainjob.PhasePending, trainjob.PhaseBlocked, trainjob.PhaseSuspended:
		if st.Message != "" {
			field("Waiting", "%s", st.Message)
		}
		if len(findings) > 0 && st.Phase == trainjob.PhasePending {
			f := findings[0]
			field("Problem", "%s", f.Message())
		}
	case trainjob.PhaseRestarting:
		field("Restarting", "%s", st.Message)
	case trainjob.PhaseRunning, trainjob.PhaseComplete:
		if st.Message != "" {
			field("Status", "%s", st.Message)
		}
		if st.Stalled != "" {
			field("Stalled", "since %s: %s", st.StalledSince.UTC().Format(time.RFC3339), st.Stalled)
		}
	}
	// Any job that has not finished needs the operator to move on (to be
	// admitted, started, marked Complete or Failed, deleted).
	if st.Phase != trainjob.PhaseCreating && !trainjob.Finished(tj) && d.Operator.Down() {
		field("Warning", "the job cannot progress: %s", d.Operator.Message())
		field("Fix", "%s", d.Operator.Fix())
	}
	return out
}

// writeTimes writes when the job was created, admitted, (re)started, had
// all its ranks up and ended, each after the one before, and how long it
// ran: the times of its conditions.
func writeTimes(field func(name, format string, args ...any), t trainjob.Times, now time.Time) {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	field("Created", "%s ago (%s)", printers.Age(t.Created, now), at(t.Created))
	prev := t.Created
	after := func(name string, when time.Time, what string) {
		field(name, "%s (%s after %s)", at(when), duration.HumanDuration(when.Sub(prev)), what)
		prev = when
	}
	if !t.Admitted.IsZero() {
		after("Admitted", t.Admitted, "creation")
	}
	if !t.Started.IsZero() && !t.Started.Equal(prev) && t.Started.After(t.Created) {
		// Resumed after a suspension.
		after("Started", t.Started, "the last step")
	}
	if !t.Running.IsZero() {
		after("All ranks up", t.Running, "it started")
	}
	if !t.Finished.IsZero() {
		field("Finished", "%s", at(t.Finished))
	}
	if d, ok := t.Duration(now); ok {
		ran := "running for "
		if !t.Finished.IsZero() {
			ran = "ran for "
		}
		field("Duration", "%s%s", ran, duration.HumanDuration(d))
	}
}

func firstTerminal(fs []diagnosis.Finding) *diagnosis.Finding {
	for i := range fs {
		if fs[i].Terminal {
			return &fs[i]
		}
	}
	if len(fs) > 0 {
		return &fs[0]
	}
	return nil
}

func nodeOf(pods []corev1.Pod, name string) string {
	for i := range pods {
		if pods[i].Name == name && pods[i].Spec.NodeName != "" {
			return " on node " + pods[i].Spec.NodeName
		}
	}
	return ""
}

func resources(r *corev1.ResourceRequirements) string {
	names := map[corev1.ResourceName]bool{}
	for n := range r.Requests {
		names[n] = true
	}
	for n := range r.Limits {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, string(n))
	}
	sort.Strings(sorted)
	parts := make([]string, 0, len(sorted))
	for _, n := range sorted {
		req, hasReq := r.Requests[corev1.ResourceName(n)]
		lim, hasLim := r.Limits[corev1.ResourceName(n)]
		switch {
		case hasReq && hasLim && req.Cmp(lim) == 0:
			parts = append(parts, fmt.Sprintf("%s %s", n, req.String()))
		case hasReq && hasLim:
			parts = append(parts, fmt.Sprintf("%s %s (limit %s)", n, req.String(), lim.String()))
		case hasReq:
			parts = append(parts, fmt.Sprintf("%s %s", n, req.String()))
		default:
			parts = append(parts, fmt.Sprintf("%s limit %s", n, lim.String()))
		}
	}
	return strings.Join(parts, ", ")
}

// HostRow is one MPI host of a job: its ranks, pod, node and state.
type HostRow struct {
	Role     string `json:"role"`
	Index    int32  `json:"index"`
	Host     string `json:"host"`
	Ranks    string `json:"ranks"`
	Pod      string `json:"pod,omitempty"`
	Node     string `json:"node,omitempty"`
	State    string `json:"state"`
	Restarts int32  `json:"restarts"`
	Reason   string `json:"reason,omitempty"`
	// Health sorts the state into what a person looks for first:
	// NotCreated, Pending, Pulling, Running, Ready, Succeeded, Failed,
	// OOMKilled or Deleted.
	Health string `json:"health"`
}

// hostRows is one row per host, the launcher first.
func hostRows(d *data, placement mpi.Placement, findings []diagnosis.Finding) []HostRow {
	hosts := job.Hosts(placement)
	byPod := map[string]*diagnosis.Finding{}
	for i := range findings {
		byPod[findings[i].Pod] = &findings[i]
	}
	rows := make([]HostRow, 0, len(hosts))
	pods := job.IndexHosts(d.Pods)
	for _, h := range hosts {
		row := HostRow{Role: h.Role, Index: h.Index, Host: h.Name(), Ranks: "-"}
		if first, last, ok := placement.Ranks(h.Role, h.Index); ok {
			row.Ranks = fmt.Sprint(first)
			if last != first {
				row.Ranks = fmt.Sprintf("%d-%d", first, last)
			}
		}
		p := pods.Of(h.Role, h.Index)
		if run, ok := d.Glance.RunningOf(h.Role, h.Index); p == nil && ok {
			// What podState and health say of such a pod read whole.
			row.Pod, row.Node, row.State, row.Health = run.Name, run.Node, "Running", "Ready"
			rows = append(rows, row)
			continue
		}
		if p == nil {
			row.State, row.Health = "NotCreated", "NotCreated"
			if trainjob.Finished(d.Info.TrainJob) {
				row.State, row.Health = "Deleted", "Deleted"
			}
			rows = append(rows, row)
			continue
		}
		row.Pod, row.Node = p.Name, p.Spec.NodeName
		row.State, row.Restarts, row.Reason = podState(p)
		f := byPod[p.Name]
		if f != nil && row.Reason == "" {
			row.Reason = f.Reason
		}
		row.Health = health(p, row.State, f)
		rows = append(rows, row)
	}
	return rows
}

// health sorts a pod's state for the eye: failures first, then how far
// it got.
func health(p *corev1.Pod, state string, f *diagnosis.Finding) string {
	switch {
	case f != nil && f.Reason == "OOMKilled":
		return "OOMKilled"
	case f != nil && f.Terminal, p.Status.Phase == corev1.PodFailed:
		return "Failed"
	case p.Status.Phase == corev1.PodSucceeded:
		return "Succeeded"
	case f != nil:
		// Waiting on something that may pass (an image, a crash loop).
		if strings.Contains(f.Reason, "Image") {
			return "Pulling"
		}
		return "Failed"
	case state == "ContainerCreating" || strings.HasPrefix(state, "Init:"):
		return "Pulling"
	case state == "Running":
		return "Ready"
	case strings.HasPrefix(state, "Running"):
		return "Running"
	}
	return "Pending"
}

// writeRanks prints one row per host: its ranks, pod, node, state,
// restarts and the last reason its container stopped or waits.
func writeRanks(w io.Writer, d *data, placement mpi.Placement, findings []diagnosis.Finding) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  RANKS\tHOST\tPOD\tNODE\tSTATE\tRESTARTS\tLAST REASON")
	for _, r := range hostRows(d, placement, findings) {
		if r.Pod == "" {
			fmt.Fprintf(tw, "  %s\t%s\t<none>\t\t%s\t\t\n", r.Ranks, r.Host, r.State)
			continue
		}
		node := r.Node
		if node == "" {
			node = "<unscheduled>"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Ranks, r.Host, r.Pod, node, r.State, r.Restarts, r.Reason)
	}
	return tw.Flush()
}

// writeNetworks lists, per host, the secondary interfaces Multus reported
// (InfiniBand/RoCE), with their IPs and RDMA devices; nothing when no pod
// has any.
func writeNetworks(w io.Writer, d *data, placement mpi.Placement) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	found := false
	pods := job.IndexHosts(d.Pods)
	for _, h := range placement.Hosts {
		p := pods.Of(h.Role, h.Index)
		if p == nil {
			continue
		}
		for _, a := range mpi.PodAttachments(p) {
			if !found {
				fmt.Fprintln(w, "\nNetworks:")
				fmt.Fprintln(tw, "  HOST\tPOD\tINTERFACE")
				found = true
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", h.Name(), p.Name, a)
		}
	}
	return tw.Flush()
}

// podState reads the trainer container's state: what it is doing, how
// often it restarted, and the last reason it stopped or waits.
func podState(p *corev1.Pod) (state string, restarts int32, reason string) {
	state = string(p.Status.Phase)
	if p.DeletionTimestamp != nil {
		state = "Terminating"
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return "Init:" + t.Reason, cs.RestartCount, fmt.Sprintf("%s exited %d", cs.Name, t.ExitCode)
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return "Init:" + w.Reason, cs.RestartCount, w.Reason
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != mpi.TrainerContainer {
			continue
		}
		restarts = cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil {
			reason = fmt.Sprintf("%s (exit %d)", t.Reason, t.ExitCode)
		}
		switch {
		case cs.State.Waiting != nil:
			state = cs.State.Waiting.Reason
			if reason == "" {
				reason = cs.State.Waiting.Reason
			}
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			state = t.Reason
			if state == "" {
				state = "Terminated"
			}
			if t.ExitCode != 0 {
				reason = fmt.Sprintf("%s (exit %d)", t.Reason, t.ExitCode)
			}
		case cs.State.Running != nil && p.DeletionTimestamp == nil:
			state = "Running"
			if !cs.Ready {
				state = "Running, not ready"
			}
		}
	}
	return state, restarts, reason
}

// shellJoin writes a command line as a shell would read it back: words
// with spaces or shell characters in single quotes.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		plain := w != ""
		for _, r := range w {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)) {
				plain = false
				break
			}
		}
		if plain {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// describedMetrics bounds the metrics describe prints of a report.
const describedMetrics = 8

// progress is the program's latest report (status.trainerStatus): how far,
// the time left while the job runs, and its metrics; "" when it sent none.
func progress(tj *trainer.TrainJob, st trainjob.State, now time.Time) string {
	p := job.ProgressOf(tj, st, now)
	if p == nil {
		return ""
	}
	var parts []string
	percent, left := p.Text()
	if percent != "" {
		parts = append(parts, percent)
	}
	if left != "" {
		parts = append(parts, "about "+left+" left")
	}
	if m := trainerstatus.Metrics(p.Metrics, describedMetrics); m != "" {
		parts = append(parts, m)
	}
	if len(parts) == 0 {
		parts = append(parts, "reported")
	}
	out := strings.Join(parts, "; ")
	if !p.Reported.IsZero() {
		out += fmt.Sprintf(" (reported %s ago)", printers.Age(p.Reported, now))
	}
	return out
}
