package job

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// A glance believes a Table row that shows a host plainly running only where
// the Job controller's ready counts agree with the rows, reads every other
// pod whole, and one running pod of each role for the facts of its role.
func TestGlanceRows(t *testing.T) {
	columns := []metav1.TableColumnDefinition{{Name: "Name"}, {Name: "Ready"}, {Name: "Status"}, {Name: "Restarts"},
		{Name: "Age"}, {Name: "IP"}, {Name: "Node"}, {Name: "Nominated Node"}, {Name: "Readiness Gates"}}
	// A row as the API server prints a pod: restarts as a string, as it
	// prints them, or as a JSON number decodes.
	row := func(name, ready, status string, restarts any, node, gates string) metav1.TableRow {
		return metav1.TableRow{Cells: []any{name, ready, status, restarts, "5m", "10.0.0.1", node, "<none>", gates}}
	}
	running := func(name string) metav1.TableRow { return row(name, "1/1", "Running", "0", "n1", "<none>") }
	jobs := func(launcherReady, workersReady int32) []ownJob {
		return []ownJob{{name: "pi-launcher-0", role: api.RoleLauncher, completions: 1, ready: launcherReady},
			{name: "pi-node-0", role: api.RoleWorker, completions: 4, ready: workersReady}}
	}
	worker := func(i int32) hostKey { return hostKey{api.RoleWorker, i} }
	type want struct {
		ok      bool
		running []hostKey
		fetch   []string
	}
	tests := map[string]struct {
		rows []metav1.TableRow
		jobs []ownJob
		want want
	}{
		"every host running, as counted; the launcher and the first worker read whole": {
			rows: []metav1.TableRow{running("pi-launcher-0-0-abcde"), running("pi-node-0-1-cdefg"), running("pi-node-0-0-bcdef")},
			jobs: jobs(1, 2),
			want: want{ok: true, running: []hostKey{worker(1)}, fetch: []string{"pi-launcher-0-0-abcde", "pi-node-0-0-bcdef"}},
		},
		"restarts as a JSON number": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), row("pi-node-0-1-cdefg", "1/1", "Running", float64(0), "n1", "<none>")},
			jobs: jobs(0, 2),
			want: want{ok: true, running: []hostKey{worker(1)}, fetch: []string{"pi-node-0-0-bcdef"}},
		},
		"a pending pod is read whole": {
			rows: []metav1.TableRow{running("pi-launcher-0-0-abcde"), row("pi-node-0-1-cdefg", "0/1", "Pending", "0", "<none>", "<none>")},
			jobs: jobs(1, 0),
			want: want{ok: true, fetch: []string{"pi-node-0-1-cdefg", "pi-launcher-0-0-abcde"}},
		},
		"a restarted pod is read whole, and still counted ready": {
			rows: []metav1.TableRow{running("pi-launcher-0-0-abcde"), row("pi-node-0-1-cdefg", "1/1", "Running", "2 (5m ago)", "n1", "<none>")},
			jobs: jobs(1, 1),
			want: want{ok: true, fetch: []string{"pi-node-0-1-cdefg", "pi-launcher-0-0-abcde"}},
		},
		"a pod with a container not ready is read whole": {
			rows: []metav1.TableRow{row("pi-node-0-0-bcdef", "1/2", "Running", "0", "n1", "<none>")},
			jobs: jobs(0, 0),
			want: want{ok: true, fetch: []string{"pi-node-0-0-bcdef"}},
		},
		"a pod of two containers, both ready": {
			rows: []metav1.TableRow{row("pi-launcher-0-0-abcde", "2/2", "Running", "0", "n1", "<none>"), running("pi-node-0-1-cdefg"), running("pi-node-0-0-bcdef")},
			jobs: jobs(1, 2),
			want: want{ok: true, running: []hostKey{worker(1)}, fetch: []string{"pi-launcher-0-0-abcde", "pi-node-0-0-bcdef"}},
		},
		"a readiness gate not passed is not ready": {
			rows: []metav1.TableRow{row("pi-node-0-0-bcdef", "1/1", "Running", "0", "n1", "0/1")},
			jobs: jobs(0, 0),
			want: want{ok: true, fetch: []string{"pi-node-0-0-bcdef"}},
		},
		"a terminating pod is read whole": {
			rows: []metav1.TableRow{row("pi-node-0-0-bcdef", "1/1", "Terminating", "0", "n1", "<none>")},
			jobs: jobs(0, 0),
			want: want{ok: true, fetch: []string{"pi-node-0-0-bcdef"}},
		},
		"a name no own Job gives is read whole, and proven there": {
			rows: []metav1.TableRow{running("pi-launcher-0-0-abcde"), running("planted"), running("pi-node-0-x-abcde"),
				running("pi-node-0-01-abcde"), running("pi-node-0-4-abcde"), running("pi-node-0-1-abcdef")},
			jobs: jobs(1, 0),
			want: want{ok: true,
				fetch: []string{"planted", "pi-node-0-x-abcde", "pi-node-0-01-abcde", "pi-node-0-4-abcde", "pi-node-0-1-abcdef", "pi-launcher-0-0-abcde"}},
		},
		"a host of two pods is read whole": {
			rows: []metav1.TableRow{running("pi-launcher-0-0-abcde"), row("pi-launcher-0-0-zzzzz", "0/1", "Error", "0", "n1", "<none>")},
			jobs: jobs(1, 0),
			want: want{ok: true, fetch: []string{"pi-launcher-0-0-abcde", "pi-launcher-0-0-zzzzz"}},
		},
		// A row that wears a host's name where the Job counts no pod of
		// it: a pod the Job controller did not make, or the counts are
		// behind the rows.
		"more ready rows than the Job counts": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), running("pi-node-0-1-zzzzz")},
			jobs: jobs(0, 1),
		},
		"fewer ready rows than the Job counts": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef")},
			jobs: jobs(0, 2),
		},
		"a planted second pod of a running host": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), running("pi-node-0-0-zzzzz")},
			jobs: jobs(0, 1),
		},
		"without a Job that counts its ready pods every pod is read whole": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef")},
			want: want{ok: true, fetch: []string{"pi-node-0-0-bcdef"}},
		},
	}
	byHost := func(a, b hostKey) int { return cmp.Or(strings.Compare(a.role, b.role), cmp.Compare(a.index, b.index)) }
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := glanceRows(&metav1.Table{ColumnDefinitions: columns, Rows: tc.rows}, tc.jobs)
			if ok != tc.want.ok {
				t.Fatalf("believed = %v, want %v", ok, tc.want.ok)
			}
			if !ok {
				return
			}
			running := slices.SortedFunc(maps.Keys(got.running), byHost)
			slices.SortFunc(tc.want.running, byHost)
			if !slices.Equal(running, tc.want.running) {
				t.Errorf("running hosts = %v, want %v", running, tc.want.running)
			}
			if !slices.Equal(got.fetch, tc.want.fetch) {
				t.Errorf("read whole = %v, want %v", got.fetch, tc.want.fetch)
			}
		})
	}
}

// The Jobs a glance counts on: those the JobSet controls, whose ready pods
// are counted, of the launcher or the workers.
func TestOwnJobs(t *testing.T) {
	js := &metav1.ObjectMeta{Name: "pi", UID: "js-uid"}
	jobSet := &metav1.PartialObjectMetadata{ObjectMeta: *js}
	jobSet.SetGroupVersionKind(jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"))
	job := func(name, rjob string, controlled bool, ready *int32) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rjob}},
			Spec: batchv1.JobSpec{Completions: ptr.To[int32](2)}, Status: batchv1.JobStatus{Ready: ready}}
		if controlled {
			j.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(jobSet, jobSet.GroupVersionKind())}
		} else {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "pi", UID: "other", Controller: ptr.To(true)}}
		}
		return j
	}
	got := ownJobs(jobSet, []batchv1.Job{
		job("pi-launcher-0", mpi.LauncherJob, true, ptr.To[int32](1)),
		job("pi-node-0", mpi.NodeJob, true, ptr.To[int32](2)),
		job("pi-node-0-planted", mpi.NodeJob, false, ptr.To[int32](2)),
		job("pi-uncounted", mpi.NodeJob, true, nil),
		job("pi-other-0", "other", true, ptr.To[int32](1)),
	})
	want := []ownJob{{name: "pi-launcher-0", role: api.RoleLauncher, completions: 2, ready: 1}, {name: "pi-node-0", role: api.RoleWorker, completions: 2, ready: 2}}
	if !slices.Equal(got, want) {
		t.Errorf("ownJobs = %+v, want %+v", got, want)
	}
}

// A Table without the columns a glance reads, or with too many pods to read
// one by one, is not glanced at.
func TestGlanceRowsFallsBack(t *testing.T) {
	jobs := []ownJob{{name: "pi-node-0", role: api.RoleWorker, completions: 1}}
	if _, ok := glanceRows(&metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name"}}}, jobs); ok {
		t.Error("a Table without the Ready, Status, Restarts and Node columns was believed")
	}
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name"}, {Name: "Ready"}, {Name: "Status"}, {Name: "Restarts"}, {Name: "Node"}}}
	for range glanceFetchMax + 1 {
		table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{"planted", "0/1", "Pending", int64(0), "<none>"}})
	}
	if _, ok := glanceRows(table, jobs); ok {
		t.Errorf("%d pods to read one by one were not listed whole", glanceFetchMax+1)
	}
	table.Rows = table.Rows[:glanceFetchMax]
	if _, ok := glanceRows(table, jobs); !ok {
		t.Errorf("%d pods to read one by one were listed whole", glanceFetchMax)
	}
}
