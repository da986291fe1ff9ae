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
// created behind Torus's gate brings its job at once; a routine change
// waits its own spacing, any other the job's shorter one.
func TestPodEvents(t *testing.T) {
	// A spaced job's reconcile comes after the test: that it was asked
	// for, and for how long after, is read from the requests.
	const delay, spaced = 100 * time.Millisecond, time.Hour
	pod := func(job string, i int, gated bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", job, i), Labels: map[string]string{api.LabelJobName: job}}}
		p.Status.Phase = corev1.PodFailed
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}}
		}
		return p
	}
	// A running worker's change is routine.
	worker := func(job string, i int) *corev1.Pod {
		p := pod(job, i, false)
		p.Labels[api.LabelRole] = api.RoleWorker
		p.Status.Phase = corev1.PodRunning
		return p
	}
	// Job "big" reconciles slowly: its pods' changes wait its spacing.
	// Job "routine" waits it for routine changes alone.
	spacing := func(job client.ObjectKey, routine bool) time.Duration {
		if job.Name == "big" || job.Name == "routine" && routine {
			return spaced
		}
		return delay
	}
	type send func(h podEventsHandler, q queue)
	for _, tc := range []struct {
		name string
		send send
		// now and later are the jobs queued at once and, of the others,
		// once the delay has passed; spaced, those asked for after the
		// job's spacing alone.
		now, later, spaced []string
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
			later:  []string{"a"},
			spaced: []string{"big"},
		},
		{
			name: "a gated pod of a job spaced beyond the delay created: its job at once",
			send: func(h podEventsHandler, q queue) { h.create(pod("big", 0, true), q) },
			now:  []string{"big"},
		},
		{
			name:   "a running worker of a job spacing routine changes changed: that job later",
			send:   func(h podEventsHandler, q queue) { h.update(worker("routine", 0), q) },
			spaced: []string{"routine"},
		},
		{
			name:  "a failed pod of a job spacing routine changes: its job after the delay",
			send:  func(h podEventsHandler, q queue) { h.update(pod("routine", 0, false), q) },
			later: []string{"routine"},
		},
		{
			name:  "a running worker of a job spacing routine changes deleted: its job after the delay",
			send:  func(h podEventsHandler, q queue) { h.delete(worker("routine", 0), q) },
			later: []string{"routine"},
		},
		{
			name: "a routine change, then a failure, of one job: the job once, after the delay",
			send: func(h podEventsHandler, q queue) {
				h.update(worker("routine", 0), q)
				h.update(pod("routine", 1, false), q)
			},
			later: []string{"routine"},
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
			q := &recordingQueue{queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())}
			defer q.ShutDown()
			h := podEventsHandler{podEvents(delay, spacing)}
			tc.send(h, q)
			if got := drain(q); !equalJobs(got, tc.now) {
				t.Errorf("queued at once: %v, want %v", got, tc.now)
			}
			if got := awaitJobs(q, tc.later, time.Minute); !equalJobs(got, tc.later) {
				t.Errorf("queued after the delay: %v, want %v", got, tc.later)
			}
			var asked []string
			for job, after := range q.soonest {
				if after >= spaced {
					asked = append(asked, job)
				}
			}
			if !equalJobs(asked, tc.spaced) {
				t.Errorf("asked for after the job's spacing: %v, want %v", asked, tc.spaced)
			}
		})
	}
}

// A worker on the way every worker takes is routine; the launcher, and a
// pod failing, ending, restarted, unschedulable or disrupted, is not.
func TestRoutinePodChange(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{name: "a worker created", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, want: true},
		{name: "a worker pending, scheduled", change: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}, want: true},
		{name: "a worker behind a scheduling gate", change: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
		}, want: true},
		{name: "a worker's container being created", change: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}, want: true},
		{name: "a worker's init container done", change: func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
		}, want: true},
		{name: "a running worker", want: true},
		{name: "the launcher", change: func(p *corev1.Pod) { p.Labels[api.LabelRole] = api.RoleLauncher }},
		{name: "a pod of no role", change: func(p *corev1.Pod) { delete(p.Labels, api.LabelRole) }},
		{name: "a worker being deleted", change: func(p *corev1.Pod) { p.DeletionTimestamp = &now }},
		{name: "a worker failed", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
		{name: "a worker succeeded", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
		{name: "a worker unschedulable", change: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}},
		{name: "a worker to be disrupted", change: func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}
		}},
		{name: "a worker's container ended in failure", change: func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
		}},
		{name: "a worker's init container ended in failure", change: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}}}
		}},
		{name: "a worker's container restarted", change: func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}},
		{name: "a worker's image not pulled", change: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		}},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi-node-0-0", Labels: map[string]string{api.LabelJobName: "pi", api.LabelRole: api.RoleWorker}}}
		p.Status.Phase = corev1.PodRunning
		if tc.change != nil {
			tc.change(p)
		}
		if got := routinePodChange(p); got != tc.want {
			t.Errorf("%s: routine %t, want %t", tc.name, got, tc.want)
		}
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

// recordingQueue is a work queue that also keeps, for each job, the
// soonest it was asked to bring the job back: the delaying queue brings it
// then, once.
type recordingQueue struct {
	queue
	soonest map[string]time.Duration
}

func (q *recordingQueue) AddAfter(r reconcile.Request, after time.Duration) {
	if q.soonest == nil {
		q.soonest = map[string]time.Duration{}
	}
	if prev, ok := q.soonest[r.Name]; !ok || after < prev {
		q.soonest[r.Name] = after
	}
	q.queue.AddAfter(r, after)
}

// awaitJobs takes the jobs the queue brings until every job of want has
// come, or timeout has passed, then the ones queued with them.
func awaitJobs(q queue, want []string, timeout time.Duration) []string {
	var got []string
	deadline := time.Now().Add(timeout)
	for !containsJobs(got, want) && time.Now().Before(deadline) {
		got = append(got, drain(q)...)
		time.Sleep(10 * time.Millisecond)
	}
	return append(got, drain(q)...)
}

func containsJobs(got, want []string) bool {
	for _, j := range want {
		if !slices.Contains(got, j) {
			return false
		}
	}
	return true
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
