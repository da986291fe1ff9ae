package diagnosis

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodCreation(t *testing.T) {
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ev := func(job, msg string, at time.Time) corev1.Event {
		return corev1.Event{Reason: ReasonFailedCreate, Message: msg, LastTimestamp: metav1.NewTime(at),
			InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: job}}
	}
	quota := `pods "pi-node-0-1-x" is forbidden: exceeded quota: team, requested: pods=1, used: pods=2, limited: pods=2`
	cases := []struct {
		name   string
		events []corev1.Event
		want   []string // reason, then words of the message
	}{
		{"nothing refused", nil, nil},
		{"quota on the workers", []corev1.Event{ev("pi-node-0", quota, start.Add(time.Minute))},
			[]string{"QuotaExceeded", "workers QuotaExceeded: the Job controller cannot create the pods of Job pi-node-0: " + quota, "ResourceQuota is used up"}},
		{"LimitRange on the launcher", []corev1.Event{ev("pi-launcher-0", `pods "pi-launcher-0-0-x" is forbidden: maximum memory usage per Container is 1Gi, but limit is 2Gi`, start.Add(time.Second))},
			[]string{"LimitRangeRefused", "launcher LimitRangeRefused", "within the namespace's LimitRange"}},
		{"Pod Security", []corev1.Event{ev("pi-node-0", `pods "x" is forbidden: violates PodSecurity "restricted:latest": unrestricted capabilities`, start.Add(time.Second))},
			[]string{"PodSecurityRefused", "privileged level"}},
		{"before the job's last start", []corev1.Event{ev("pi-node-0", quota, start.Add(-time.Minute))}, nil},
		{"another job's", []corev1.Event{ev("pi2-node-0", quota, start.Add(time.Minute)), ev("other-pi-node-0", quota, start.Add(time.Minute))}, nil},
		{"not a Job", []corev1.Event{{Reason: ReasonFailedCreate, Message: quota, LastTimestamp: metav1.NewTime(start.Add(time.Minute)),
			InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Name: "pi-node-0"}}}, nil},
		{"unknown refusal", []corev1.Event{ev("pi-node-0", `admission webhook "x" denied the request: no`, start.Add(time.Minute))},
			[]string{ReasonFailedCreate, "see the events of Job pi-node-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PodCreation(tc.events, "pi", start)
			if len(tc.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("findings %v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d findings, want 1: %v", len(got), got)
			}
			if got[0].Reason != tc.want[0] {
				t.Errorf("reason %s, want %s", got[0].Reason, tc.want[0])
			}
			msg := got[0].Message()
			for _, w := range tc.want[1:] {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "[pod") {
				t.Errorf("message %q names a pod that was never created", msg)
			}
		})
	}
	if got := TrainJobOfJob("my-job-node-12"); got != "my-job" {
		t.Errorf("TrainJobOfJob = %q", got)
	}
}
