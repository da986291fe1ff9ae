package exec

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/job"
)

func pod(role string, index int, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pi-%s-%d", role, index), Labels: map[string]string{
			api.LabelRole: role, "batch.kubernetes.io/job-completion-index": fmt.Sprint(index),
		}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestForRank(t *testing.T) {
	info := &job.Info{TrainJob: mpi.NewTrainJob("pi", "ns"), Job: &mpi.Job{Name: "pi", Workers: 3, SlotsPerHost: 4}}
	pods := []corev1.Pod{pod("launcher", 0, corev1.PodRunning), pod("worker", 0, corev1.PodRunning), pod("worker", 1, corev1.PodRunning), pod("worker", 2, corev1.PodPending)}
	cases := map[int32]struct {
		wantPod, wantRanks, wantErr string
	}{
		0:  {wantPod: "pi-worker-0", wantRanks: "ranks 0-3"},
		5:  {wantPod: "pi-worker-1", wantRanks: "ranks 4-7"},
		9:  {wantErr: "rank 9 runs on worker-2, pod pi-worker-2: the pod is Pending, not Running"},
		12: {wantErr: "rank 12 is out of range: the job has ranks 0 to 11"},
	}
	for rank, tc := range cases {
		got, err := forRank(info, pods, rank)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ForRank(%d) error = %v, want %q", rank, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ForRank(%d) = %v", rank, err)
		}
		if got.Pod.Name != tc.wantPod || got.Ranks != tc.wantRanks {
			t.Errorf("ForRank(%d) = %s (%s), want %s (%s)", rank, got.Pod.Name, got.Ranks, tc.wantPod, tc.wantRanks)
		}
	}

	// When the launcher runs ranks, it has the first slots.
	info.Job.LauncherRunsRanks = true
	got, err := forRank(info, pods, 2)
	if err != nil || got.Host.Role != api.RoleLauncher {
		t.Errorf("ForRank(2) with runLauncherAsNode = %+v, %v; want the launcher", got, err)
	}

	if _, err := workers(info, pods); err == nil || !strings.Contains(err.Error(), "1 of 3 workers are not running ([worker-2])") {
		t.Errorf("Workers() error = %v, want worker-2 named", err)
	}
}

func TestLineWriter(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	a := &lineWriter{mu: &mu, w: &out, prefix: "[a] "}
	b := &lineWriter{mu: &mu, w: &out, prefix: "[b] "}
	fmt.Fprint(a, "one ")
	fmt.Fprint(b, "x\ny")
	fmt.Fprint(a, "line\ntwo\n")
	b.flush()
	a.flush()
	want := "[b] x\n[a] one line\n[a] two\n[b] y\n"
	if out.String() != want {
		t.Errorf("output = %q, want %q", out.String(), want)
	}
}
