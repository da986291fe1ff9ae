package job

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// PodTables reads the pods a label selector selects as the API server's
// Table of them: each pod's name, ready containers, state, restarts and
// node, one short row where the pod itself is several KiB.
type PodTables interface {
	PodTable(ctx context.Context, namespace, selector string) (*metav1.Table, error)
}

// NewPodTables reads pod Tables through kube.
func NewPodTables(kube kubernetes.Interface) PodTables { return podTables{kube} }

type podTables struct{ kube kubernetes.Interface }

func (t podTables) PodTable(ctx context.Context, namespace, selector string) (*metav1.Table, error) {
	raw, err := t.kube.CoreV1().RESTClient().Get().Namespace(namespace).Resource("pods").
		Param("labelSelector", selector).
		// The rows alone: with each pod's metadata the Table is as
		// large as the pods themselves (their managedFields).
		Param("includeObject", string(metav1.IncludeNone)).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, fmt.Errorf("decoding the Table of pods: %w", err)
	}
	return &table, nil
}

// RunningPod is a host's pod as a Table row showed it: running, every
// container ready, none restarted.
type RunningPod struct {
	Name string
	Node string
}

// Glance is a job's pods as a view of every host needs them: the pods that
// are not plainly running, read whole for their diagnosis, and the hosts
// that are, as their Table rows show them.
type Glance struct {
	// Pods are the job's own pods (OwnPods) read whole, sorted as
	// SortPods sorts them.
	Pods []corev1.Pod
	// running is, by host, the pod of each host that Pods leaves out:
	// running, ready and never restarted.
	running map[hostKey]RunningPod
}

// RunningOf is the pod of a host that Pods leaves out, as its Table row
// showed it running.
func (g *Glance) RunningOf(role string, index int32) (RunningPod, bool) {
	if g == nil {
		return RunningPod{}, false
	}
	p, ok := g.running[hostKey{role, index}]
	return p, ok
}

// glanceFetchMax is the most pods a glance reads one by one, those its
// Table shows not plainly running; a job with more has them listed whole.
const glanceFetchMax = 64

// GlancePods reads a job's pods for a view of all its hosts (describe, the
// dashboard's job page). Without tables, or when the glance cannot be
// trusted, it is Pods: every pod read whole. With tables it reads the
// pods' Table and then, one by one, only the pods it shows not plainly
// running, and one running pod of each role, whose spec gives the facts of
// its role: those a failure's fix names of the workers (their probed sshd
// port, their GPUs), and what each pod of the role requests, as the pods
// of one role are made from one Job's template.
//
// A Table row carries no owner, so whoever may create pods in the
// namespace could add a row that wears the job's labels. A row is
// therefore believed only where the rows agree with what the Job controller
// counted of the pods of the job's own Jobs (trainjob.OwnPods' chain): each
// Job's ready rows are exactly its ready pods, and its Jobs did not change
// while the Table was read. Any other answer, as while pods change, reads
// every pod whole. What the counts cannot tell is a pod planted in the
// place of one of the job's that was deleted or stopped being ready before
// the Job controller counted it again: about a second, or for as long as
// that controller does not run.
func GlancePods(ctx context.Context, c client.Reader, tables PodTables, tj *trainer.TrainJob) (*Glance, error) {
	full := func() (*Glance, error) {
		pods, err := Pods(ctx, c, tj)
		return &Glance{Pods: pods}, err
	}
	if tables == nil {
		return full()
	}
	js, err := jobSetOf(ctx, c, tj)
	if err != nil {
		return nil, err
	}
	if js == nil || !metav1.IsControlledBy(js, tj) {
		return &Glance{}, nil
	}
	listJobs := func() (*batchv1.JobList, error) {
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs, client.InNamespace(tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name}); err != nil {
			return nil, fmt.Errorf("listing the Jobs of MPI job %s/%s: %w", tj.Namespace, tj.Name, err)
		}
		return &jobs, nil
	}
	// The Jobs before and after the Table: counts that held all along are
	// the counts of the pods the rows show.
	jobs, err := listJobs()
	if err != nil {
		return nil, err
	}
	table, err := tables.PodTable(ctx, tj.Namespace, api.LabelJobName+"="+tj.Name)
	if err != nil {
		// A glance only spares the pods: whatever refused the Table (a
		// proxy that serves no Tables, say), the pods may still be read.
		return full()
	}
	after, err := listJobs()
	if err != nil {
		return nil, err
	}
	if !sameJobs(jobs.Items, after.Items) {
		return full()
	}
	rows, ok := glanceRows(table, ownJobs(js, jobs.Items))
	if !ok {
		return full()
	}
	owners := make([]metav1.Object, len(jobs.Items))
	for i := range jobs.Items {
		owners[i] = &jobs.Items[i]
	}
	fetched := make([]*corev1.Pod, len(rows.fetch))
	g, gctx := errgroup.WithContext(ctx)
	// A few reads at once: at most glanceFetchMax of them, each small.
	g.SetLimit(8)
	for i, name := range rows.fetch {
		g.Go(func() error {
			var p corev1.Pod
			if err := c.Get(gctx, client.ObjectKey{Namespace: tj.Namespace, Name: name}, &p); err != nil {
				return client.IgnoreNotFound(err) // not found: deleted since the Table
			}
			fetched[i] = &p
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if apierrors.IsForbidden(err) {
			// Pods that may be listed but not read one by one.
			return full()
		}
		return nil, fmt.Errorf("reading the pods of MPI job %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	var pods []corev1.Pod
	for _, p := range fetched {
		if p != nil {
			pods = append(pods, *p)
		}
	}
	pods = trainjob.OwnPods(tj, js, owners, pods)
	SortPods(pods)
	return &Glance{Pods: pods, running: rows.running}, nil
}

// sameJobs reports whether two lists of Jobs hold the same Jobs, each
// unchanged.
func sameJobs(a, b []batchv1.Job) bool {
	if len(a) != len(b) {
		return false
	}
	versions := make(map[types.UID]string, len(a))
	for i := range a {
		versions[a[i].UID] = a[i].ResourceVersion
	}
	for i := range b {
		if v, ok := versions[b[i].UID]; !ok || v != b[i].ResourceVersion {
			return false
		}
	}
	return true
}

// ownJob is one of the job's own Jobs, with what the Job controller
// counted of its pods.
type ownJob struct {
	name string
	role string
	// completions is how many indexes the Job has; a row of any other
	// index is not one of its pods.
	completions int32
	ready       int32
}

// ownJobs are the Jobs the JobSet controls, each with its role; a Job whose
// ready pods are not counted is left out, so that its rows are read whole.
func ownJobs(js metav1.Object, jobs []batchv1.Job) []ownJob {
	var out []ownJob
	for i := range jobs {
		j := &jobs[i]
		if !metav1.IsControlledBy(j, js) || j.Status.Ready == nil || j.Spec.Completions == nil {
			continue
		}
		var role string
		switch j.Labels[jobsetv1alpha2.ReplicatedJobNameKey] {
		case mpi.LauncherJob:
			role = api.RoleLauncher
		case mpi.NodeJob:
			role = api.RoleWorker
		default:
			continue
		}
		out = append(out, ownJob{name: j.Name, role: role, completions: *j.Spec.Completions, ready: *j.Status.Ready})
	}
	return out
}

// glanced is what a glance makes of a Table: the hosts plainly running and
// the pods to read whole.
type glanced struct {
	running map[hostKey]RunningPod
	fetch   []string
}

// glanceRow is what a glance reads of one row.
type glanceRow struct {
	name, node string
	// job is the index in the own Jobs of the Job whose pod the name
	// says the row is; -1 when none.
	job  int
	host hostKey
	// ready as the Job controller counts a pod ready: its Ready
	// condition, which needs its containers and readiness gates.
	ready bool
	// plain: ready, never restarted and on a node.
	plain bool
}

// glanceRows sorts a Table's rows into hosts plainly running and pods to
// read whole. It answers false when the rows cannot be believed (see
// GlancePods) or too many pods would be read one by one.
func glanceRows(table *metav1.Table, jobs []ownJob) (glanced, bool) {
	col := map[string]int{}
	for i, c := range table.ColumnDefinitions {
		col[c.Name] = i
	}
	for _, name := range []string{"Name", "Ready", "Status", "Restarts", "Node"} {
		if _, ok := col[name]; !ok {
			return glanced{}, false
		}
	}
	cell := func(r *metav1.TableRow, name string) string {
		i, ok := col[name]
		if !ok || i >= len(r.Cells) {
			return ""
		}
		switch v := r.Cells[i].(type) {
		case string:
			return v
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		case int64:
			return strconv.FormatInt(v, 10)
		}
		return ""
	}
	rows := make([]glanceRow, 0, len(table.Rows))
	perHost := map[hostKey]int{}
	counted := make([]int32, len(jobs))
	for i := range table.Rows {
		r := &table.Rows[i]
		row := glanceRow{name: cell(r, "Name"), node: cell(r, "Node"), job: -1}
		if row.name == "" {
			return glanced{}, false
		}
		// The pod's Ready condition, as the printer shows it; a pod
		// about to be evicted (DisruptionTarget) still shows ready
		// until its deletion, a moment later, makes it Terminating.
		row.ready = cell(r, "Status") == "Running" && allOf(cell(r, "Ready"), false) && allOf(cell(r, "Readiness Gates"), true)
		row.plain = row.ready && cell(r, "Restarts") == "0" && row.node != "" && row.node != "<none>"
		if j, host, ok := hostOfName(row.name, jobs); ok {
			row.job, row.host = j, host
			perHost[host]++
			if row.ready {
				counted[j]++
			}
		}
		rows = append(rows, row)
	}
	for i, j := range jobs {
		if counted[i] != j.ready {
			return glanced{}, false
		}
	}
	out := glanced{running: map[hostKey]RunningPod{}}
	// The plain row of least index of each role, read whole for the
	// facts of its role.
	facts := map[string]*glanceRow{}
	for i := range rows {
		row := &rows[i]
		// A host of two pods (a failed one and its replacement, or a
		// planted one) is shown from its pods read whole.
		if row.job < 0 || !row.plain || perHost[row.host] > 1 {
			out.fetch = append(out.fetch, row.name)
			continue
		}
		out.running[row.host] = RunningPod{Name: row.name, Node: row.node}
		if f := facts[row.host.role]; f == nil || row.host.index < f.host.index {
			facts[row.host.role] = row
		}
	}
	for _, role := range []string{api.RoleLauncher, api.RoleWorker} {
		if f := facts[role]; f != nil {
			delete(out.running, f.host)
			out.fetch = append(out.fetch, f.name)
		}
	}
	if len(out.fetch) > glanceFetchMax {
		return glanced{}, false
	}
	return out, true
}

// allOf reads a count cell, "3/3": whether all are, and at least one (or
// none at all, "<none>" or empty, when orNone).
func allOf(cell string, orNone bool) bool {
	if cell == "" || cell == "<none>" {
		return orNone
	}
	have, want, ok := strings.Cut(cell, "/")
	return ok && have == want && have != "0"
}

// hostOfName reads, from a pod's name, which of jobs made it and for which
// host: the Job controller names the pod of index i of an indexed Job
// "<job>-<i>-<5 characters>", cutting the Job's name only where that
// would pass 63 characters, which a job's name cannot make its pods' do
// (mpi.MaxTrainJobNameLength). The name only says which host the row
// would be; the counts of GlancePods decide whether the row is believed.
func hostOfName(name string, jobs []ownJob) (int, hostKey, bool) {
	for i, j := range jobs {
		rest, ok := strings.CutPrefix(name, j.name+"-")
		if !ok {
			continue
		}
		index, suffix, ok := strings.Cut(rest, "-")
		if !ok || len(suffix) != 5 {
			continue
		}
		n, err := strconv.ParseInt(index, 10, 32)
		if err != nil || n < 0 || n >= int64(j.completions) || strconv.FormatInt(n, 10) != index {
			continue
		}
		return i, hostKey{j.role, int32(n)}, true
	}
	return 0, hostKey{}, false
}
