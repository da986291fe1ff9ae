package job

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
)

// Each host's pod is the newest one not being deleted, else the first
// found; IndexHosts picks as PodOf does, in one pass.
func TestHostPods(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := func(name, role string, index int, age time.Duration, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age)),
			Labels: map[string]string{api.LabelRole: role, "batch.kubernetes.io/job-completion-index": strconv.Itoa(index)}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return p
	}
	tests := map[string]struct {
		pods  []corev1.Pod
		role  string
		index int32
		want  string
	}{
		"the only pod":                 {pods: []corev1.Pod{pod("a", api.RoleWorker, 1, 0, false)}, role: api.RoleWorker, index: 1, want: "a"},
		"no pod of the host":           {pods: []corev1.Pod{pod("a", api.RoleWorker, 1, 0, false)}, role: api.RoleWorker, index: 2},
		"another role, the same index": {pods: []corev1.Pod{pod("a", api.RoleLauncher, 0, 0, false)}, role: api.RoleWorker, index: 0},
		"the newest of two": {pods: []corev1.Pod{pod("old", api.RoleWorker, 0, time.Hour, false), pod("new", api.RoleWorker, 0, 0, false)},
			role: api.RoleWorker, index: 0, want: "new"},
		"the newest, whatever the order": {pods: []corev1.Pod{pod("new", api.RoleWorker, 0, 0, false), pod("old", api.RoleWorker, 0, time.Hour, false)},
			role: api.RoleWorker, index: 0, want: "new"},
		"not the one being deleted": {pods: []corev1.Pod{pod("replacement", api.RoleWorker, 0, time.Hour, false), pod("going", api.RoleWorker, 0, 0, true)},
			role: api.RoleWorker, index: 0, want: "replacement"},
		"being deleted, when no other": {pods: []corev1.Pod{pod("going", api.RoleWorker, 0, 0, true)}, role: api.RoleWorker, index: 0, want: "going"},
		"the first of two being deleted": {pods: []corev1.Pod{pod("first", api.RoleWorker, 0, time.Hour, true), pod("second", api.RoleWorker, 0, 0, true)},
			role: api.RoleWorker, index: 0, want: "first"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for how, got := range map[string]*corev1.Pod{"PodOf": PodOf(tc.pods, tc.role, tc.index), "IndexHosts": IndexHosts(tc.pods).Of(tc.role, tc.index)} {
				gotName := ""
				if got != nil {
					gotName = got.Name
				}
				if gotName != tc.want {
					t.Errorf("%s = %q, want %q", how, gotName, tc.want)
				}
			}
		})
	}
}
