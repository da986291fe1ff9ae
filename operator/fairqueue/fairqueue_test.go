package fairqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/torus-mpi/torus/operator/fairqueue"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// drain gets every item, marking each done, as a controller's workers do.
func drain(q workqueue.TypedInterface[reconcile.Request]) []string {
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		q.Done(r)
		out = append(out, r.String())
	}
	return out
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name string
		add  []reconcile.Request
		want []string
	}{{
		name: "one namespace is first in, first out",
		add:  []reconcile.Request{req("a", "1"), req("a", "2"), req("a", "3")},
		want: []string{"a/1", "a/2", "a/3"},
	}, {
		name: "namespaces take turns in the order they came",
		add:  []reconcile.Request{req("a", "1"), req("a", "2"), req("a", "3"), req("b", "1"), req("c", "1"), req("b", "2")},
		want: []string{"a/1", "b/1", "c/1", "a/2", "b/2", "a/3"},
	}, {
		name: "an item added again keeps its place",
		add:  []reconcile.Request{req("a", "1"), req("a", "2"), req("a", "1"), req("b", "1")},
		want: []string{"a/1", "b/1", "a/2"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Queue: fairqueue.New(fairqueue.Namespace)})
			defer q.ShutDown()
			for _, r := range tt.add {
				q.Add(r)
			}
			if diff := cmp.Diff(tt.want, drain(q)); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}

// A namespace arriving while another's flood is being worked through waits
// for one of the flood's items, not for all of them.
func TestNoNamespaceStarvesAnother(t *testing.T) {
	const flood = 10000
	q := fairqueue.NewRateLimiting("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for i := range flood {
		q.Add(req("flood", fmt.Sprint(i)))
	}
	for range 3 {
		r, _ := q.Get()
		q.Done(r)
	}
	q.Add(req("quiet", "job"))
	// The flood keeps coming: every item it had done comes back.
	q.Add(req("flood", "0"))
	var waited int
	for {
		r, _ := q.Get()
		q.Done(r)
		if r.Namespace == "quiet" {
			break
		}
		waited++
	}
	if waited > 1 {
		t.Errorf("the quiet namespace's request waited for %d of another namespace's; want at most 1", waited)
	}
}

// Delayed items and rate-limited retries come back through the same queue.
func TestDelaysKeepTurns(t *testing.T) {
	q := fairqueue.NewRateLimiting("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	q.AddAfter(req("b", "later"), 10*time.Millisecond)
	q.AddRateLimited(req("a", "retry"))
	q.Add(req("a", "now"))
	got := []string{}
	for len(got) < 3 {
		r, _ := q.Get()
		q.Done(r)
		got = append(got, r.String())
	}
	if got[0] != "a/now" {
		t.Errorf("first = %s, want the item added without delay", got[0])
	}
	if diff := cmp.Diff([]string{"a/retry", "b/later"}, got[1:], cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("delayed items (-want,+got):\n%s", diff)
	}
}
