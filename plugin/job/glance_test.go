package job

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
)

// A glance believes a Table row that shows a host plainly running only where
// the Job controller's ready counts agree with the rows, and reads every
// other pod whole.
func TestGlanceRows(t *testing.T) {
	columns := []metav1.TableColumnDefinition{{Name: "Name"}, {Name: "Ready"}, {Name: "Status"}, {Name: "Restarts"},
		{Name: "Age"}, {Name: "IP"}, {Name: "Node"}, {Name: "Nominated Node"}, {Name: "Readiness Gates"}}
	// A row as the API server prints a pod; restarts as JSON numbers
	// decode.
	row := func(name, ready, status string, restarts any, node, gates string) metav1.TableRow {
		return metav1.TableRow{Cells: []any{name, ready, status, restarts, "5m", "10.0.0.1", node, "<none>", gates}}
	}
	running := func(name string) metav1.TableRow { return row(name, "1/1", "Running", float64(0), "n1", "<none>") }
	jobs := func(launcherReady, workersReady int32) []ownJob {
		return []ownJob{{name: "pi-launcher-0", role: api.RoleLauncher, ready: launcherReady}, {name: "pi-node-0", role: api.RoleWorker, ready: workersReady}}
	}
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
		"every host running, as counted": {
			rows: []metav1.TableRow{running("pi-launcher-0-0-abcde"), running("pi-node-0-0-bcdef"), running("pi-node-0-1-cdefg")},
			jobs: jobs(1, 2),
			want: want{ok: true, running: []hostKey{{api.RoleLauncher, 0}, {api.RoleWorker, 0}, {api.RoleWorker, 1}}},
		},
		"a pending pod is read whole": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), row("pi-node-0-1-cdefg", "0/1", "Pending", float64(0), "<none>", "<none>")},
			jobs: jobs(0, 1),
			want: want{ok: true, running: []hostKey{{api.RoleWorker, 0}}, fetch: []string{"pi-node-0-1-cdefg"}},
		},
		"a restarted pod is read whole, and still counted ready": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), row("pi-node-0-1-cdefg", "1/1", "Running", "2 (5m ago)", "n1", "<none>")},
			jobs: jobs(0, 2),
			want: want{ok: true, running: []hostKey{{api.RoleWorker, 0}}, fetch: []string{"pi-node-0-1-cdefg"}},
		},
		"a pod not ready is read whole": {
			rows: []metav1.TableRow{row("pi-node-0-0-bcdef", "0/1", "Running", float64(0), "n1", "<none>")},
			jobs: jobs(0, 0),
			want: want{ok: true, fetch: []string{"pi-node-0-0-bcdef"}},
		},
		"a readiness gate not passed is not ready": {
			rows: []metav1.TableRow{row("pi-node-0-0-bcdef", "1/1", "Running", float64(0), "n1", "0/1")},
			jobs: jobs(0, 0),
			want: want{ok: true, fetch: []string{"pi-node-0-0-bcdef"}},
		},
		"a name no own Job gives is read whole, and proven there": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), running("planted"), running("pi-node-0-x-abcde"), running("pi-node-0-01-abcde")},
			jobs: jobs(0, 1),
			want: want{ok: true, running: []hostKey{{api.RoleWorker, 0}}, fetch: []string{"planted", "pi-node-0-x-abcde", "pi-node-0-01-abcde"}},
		},
		// A row that wears a host's name where the Job counts no pod of
		// it: a pod the Job controller did not make, or the counts are
		// behind the rows.
		"more running rows than the Job counts ready": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), running("pi-node-0-1-zzzzz")},
			jobs: jobs(0, 1),
		},
		"fewer running rows than the Job counts ready": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef")},
			jobs: jobs(0, 2),
		},
		"two rows of one host": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef"), row("pi-node-0-0-zzzzz", "0/1", "Pending", float64(0), "<none>", "<none>")},
			jobs: jobs(0, 1),
		},
		"a Job whose ready pods are not counted reads every pod": {
			rows: []metav1.TableRow{running("pi-node-0-0-bcdef")},
			jobs: nil,
			want: want{ok: true, fetch: []string{"pi-node-0-0-bcdef"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := glanceRows(&metav1.Table{ColumnDefinitions: columns, Rows: tc.rows}, tc.jobs)
			if ok != tc.want.ok {
				t.Fatalf("believed = %v, want %v", ok, tc.want.ok)
			}
			if !ok {
				return
			}
			var running []hostKey
			for k := range got.running {
				running = append(running, k)
			}
			cmp := func(a, b hostKey) int {
				if a.role != b.role {
					return -len(a.role) + len(b.role)
				}
				return int(a.index - b.index)
			}
			slices.SortFunc(running, cmp)
			slices.SortFunc(tc.want.running, cmp)
			if !slices.Equal(running, tc.want.running) {
				t.Errorf("running hosts = %v, want %v", running, tc.want.running)
			}
			if !slices.Equal(got.fetch, tc.want.fetch) {
				t.Errorf("read whole = %v, want %v", got.fetch, tc.want.fetch)
			}
		})
	}
}

// A Table without the columns a glance reads, or with too many pods to read
// one by one, is not glanced at.
func TestGlanceRowsFallsBack(t *testing.T) {
	jobs := []ownJob{{name: "pi-node-0", role: api.RoleWorker}}
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
