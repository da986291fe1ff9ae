package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/torus-mpi/torus/api"
)

// TestPodEvents: the changes of a job's pods within the delay (or the
// job's spacing, reconcileCosts) are one reconcile of the job; a pod
// created behind Torus's gate brings its job at once.
func TestPodEvents(t *testing.T) {
	const delay = 100 * time.Millisecond
	pod := func(job string, i int, gated bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", job, i), Labels: map[string]string{api.LabelJobName: job}}}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}}
		}
		return p
	}
	// Job "big" reconciles slowly: its pods' changes wait 10 delays.
	spacing := func(job client.ObjectKey) time.Duration {
		if job.Name == "big" {
			return 10 * delay
		}
		return delay
	}
	type send func(h podEventsHandler, q queue)
	for _, tc := range []struct {
		name string
		send send
		// now and later are the jobs queued at once and, of the others,
		// once the delay has passed.
		now, later []string
	}{
		{
			name: "a gated pod created: its job at once",
			send: func(h podEventsHandler, q queue) { h.create(pod("a", 0, true), q) },
			now:  []string{"a"},
		},
		{
			name:  "an ungated pod created: its job after the delay",
			send:  func(h podEventsHandler, q queue) { h.create(pod("a", 0, false), q) },
			later: []string{"a"},
		},
		{
			name: "256 pods of one job changed, and one of another: each job once, after the delay",
			send: func(h podEventsHandler, q queue) {
				for i := range 256 {
					h.update(pod("a", i, false), q)
				}
				h.update(pod("b", 0, false), q)
			},
			later: []string{"a", "b"},
		},
		{
			name: "a pod of a job spaced beyond the delay changed: that job later, another after the delay",
			send: func(h podEventsHandler, q queue) {
				h.update(pod("big", 0, false), q)
				h.update(pod("a", 0, false), q)
			},
			later: []string{"a"},
		},
		{
			name: "a gated pod of a job spaced beyond the delay created: its job at once",
			send: func(h podEventsHandler, q queue) { h.create(pod("big", 0, true), q) },
			now:  []string{"big"},
		},
		{
			name:  "a pod deleted: its job after the delay",
			send:  func(h podEventsHandler, q queue) { h.delete(pod("a", 0, false), q) },
			later: []string{"a"},
		},
		{
			name: "a pod of no job: nothing",
			send: func(h podEventsHandler, q queue) {
				h.update(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}}, q)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h := podEventsHandler{podEvents(delay, spacing)}
			tc.send(h, q)
			if got := drain(q); !equalJobs(got, tc.now) {
				t.Errorf("queued at once: %v, want %v", got, tc.now)
			}
			time.Sleep(3 * delay)
			if got := drain(q); !equalJobs(got, tc.later) {
				t.Errorf("queued after the delay: %v, want %v", got, tc.later)
			}
		})
	}
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// podEventsHandler sends events to podEvents' functions.
type podEventsHandler struct {
	f interface {
		Create(context.Context, event.CreateEvent, queue)
		Update(context.Context, event.UpdateEvent, queue)
		Delete(context.Context, event.DeleteEvent, queue)
	}
}

func (h podEventsHandler) create(p *corev1.Pod, q queue) {
	h.f.Create(context.Background(), event.CreateEvent{Object: p}, q)
}

func (h podEventsHandler) update(p *corev1.Pod, q queue) {
	h.f.Update(context.Background(), event.UpdateEvent{ObjectOld: p, ObjectNew: p}, q)
}

func (h podEventsHandler) delete(p *corev1.Pod, q queue) {
	h.f.Delete(context.Background(), event.DeleteEvent{Object: p}, q)
}

// drain takes every job queued now, in order.
func drain(q queue) []string {
	var jobs []string
	for q.Len() > 0 {
		r, _ := q.Get()
		jobs = append(jobs, r.Name)
		q.Done(r)
		q.Forget(r)
	}
	return jobs
}

func equalJobs(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]bool{}
	for _, j := range got {
		seen[j] = true
	}
	for _, j := range want {
		if !seen[j] {
			return false
		}
	}
	return true
}

// A reconcile reads the pods indexed under its job (indexPodJob): those
// wearing the job's label, as podToTrainJob maps their changes to it.
func TestIndexPodJob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{name: "a job's pod", labels: map[string]string{api.LabelJobName: "pi"}, want: []string{"pi"}},
		{name: "no labels"},
		{name: "an empty job name", labels: map[string]string{api.LabelJobName: ""}},
		{name: "another label alone", labels: map[string]string{"app": "pi"}},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: tc.labels}}
		if got := indexPodJob(p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: indexed under %q, want %q", tc.name, got, tc.want)
		}
		var brings []string
		for _, r := range podToTrainJob(context.Background(), p) {
			brings = append(brings, r.Name)
		}
		if !slices.Equal(brings, tc.want) {
			t.Errorf("%s: its changes bring back %q, want %q", tc.name, brings, tc.want)
		}
	}
}
