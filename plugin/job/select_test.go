package job

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestSelector(t *testing.T) {
	mpiJob := labels.Set{api.LabelImplementation: "OpenMPI", "team": "a"}
	other := labels.Set{"team": "a"}
	cases := map[string]struct {
		user     string
		wantErr  bool
		mpiMatch bool
	}{
		"every MPI job":                  {user: "", mpiMatch: true},
		"MPI jobs of the selector":       {user: "team=a", mpiMatch: true},
		"none outside the selector":      {user: "team=b"},
		"a selector that does not parse": {user: "team in (a", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sel, err := Selector(tc.user)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Selector(%q) error = %v, want error %v", tc.user, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got := sel.Matches(mpiJob); got != tc.mpiMatch {
				t.Errorf("matches an MPI job = %v, want %v", got, tc.mpiMatch)
			}
			if sel.Matches(other) {
				t.Errorf("%s matches a TrainJob that is not an MPI job", sel)
			}
		})
	}
}

// The API server reads what HostsSelector selects; OfHosts then keeps
// the hosts' own pods of those.
func TestHostsSelectorReadsOnlyTheHostsPods(t *testing.T) {
	host := func(job, role string, index int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: job + "-" + role + "-" + strconv.Itoa(index),
			Labels: map[string]string{
				api.LabelJobName: job, api.LabelRole: role,
				batchv1.JobCompletionIndexAnnotation: strconv.Itoa(index),
			},
		}}
	}
	pods := []*corev1.Pod{
		host("pi", api.RoleLauncher, 0),
		host("pi", api.RoleWorker, 0),
		host("pi", api.RoleWorker, 1),
		host("pi", api.RoleWorker, 7),
		host("pi", api.RoleWorker, 37),
		host("other", api.RoleWorker, 37),
		host("other", api.RoleLauncher, 0),
	}
	launcher := mpi.Host{Role: api.RoleLauncher}
	worker := func(i int32) mpi.Host { return mpi.Host{Role: api.RoleWorker, Index: i} }
	cases := []struct {
		name     string
		hosts    []mpi.Host
		selected []string // what the API server returns
		streamed []string // what OfHosts keeps of it
	}{
		{
			name:     "every host",
			selected: []string{"pi-launcher-0", "pi-worker-0", "pi-worker-1", "pi-worker-7", "pi-worker-37"},
			streamed: []string{"pi-launcher-0", "pi-worker-0", "pi-worker-1", "pi-worker-7", "pi-worker-37"},
		},
		{
			name:     "the launcher",
			hosts:    []mpi.Host{launcher},
			selected: []string{"pi-launcher-0"},
			streamed: []string{"pi-launcher-0"},
		},
		{
			name:     "one worker",
			hosts:    []mpi.Host{worker(37)},
			selected: []string{"pi-worker-37"},
			streamed: []string{"pi-worker-37"},
		},
		{
			name:     "the launcher and the first workers: worker 0 shares the launcher's index",
			hosts:    []mpi.Host{launcher, worker(1)},
			selected: []string{"pi-launcher-0", "pi-worker-0", "pi-worker-1"},
			streamed: []string{"pi-launcher-0", "pi-worker-1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := HostsSelector("pi", tc.hosts)
			if err != nil {
				t.Fatalf("HostsSelector() = %v", err)
			}
			sel, err := labels.Parse(raw)
			if err != nil {
				t.Fatalf("the API server cannot parse %q: %v", raw, err)
			}
			keep := OfHosts(tc.hosts)
			var selected, streamed []string
			for _, p := range pods {
				if !sel.Matches(labels.Set(p.Labels)) {
					continue
				}
				selected = append(selected, p.Name)
				if keep(p) {
					streamed = append(streamed, p.Name)
				}
			}
			if diff := cmp.Diff(tc.selected, selected); diff != "" {
				t.Errorf("selected by %q (-want +got):\n%s", raw, diff)
			}
			if diff := cmp.Diff(tc.streamed, streamed); diff != "" {
				t.Errorf("streamed (-want +got):\n%s", diff)
			}
		})
	}
}
