// Package fairqueue orders a controller's work round-robin across tenants,
// so that one tenant's flood of events cannot starve another's. Torus is
// one operator for every namespace of a cluster: with a first-in, first-out
// queue, a namespace that updates thousands of its TrainJobs at once puts
// every other namespace's next reconcile behind all of them.
//
// The order is all this package decides. Deduplication, the rule that an
// item is never processed twice at once, delays and rate limits stay
// client-go's workqueue's, which takes the order as its Queue.
package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a workqueue.Queue that pops one item per tenant in turn: each
// tenant's items first-in, first-out, the tenants in the order they came.
// It is not safe for concurrent use; workqueue.Typed locks around it.
type Queue[T comparable] struct {
	tenant func(T) string
	// turns are the tenants with items, in turn order; next is whose turn
	// it is.
	turns []string
	next  int
	items map[string][]T
	n     int
}

var _ workqueue.Queue[reconcile.Request] = (*Queue[reconcile.Request])(nil)

// New returns an empty queue that takes turns between the tenants tenant
// names.
func New[T comparable](tenant func(T) string) *Queue[T] {
	return &Queue[T]{tenant: tenant, items: map[string][]T{}}
}

// Touch keeps an item where it is: a tenant gains nothing by adding again.
func (q *Queue[T]) Touch(T) {}

// Push adds an item at the end of its tenant's items; a tenant without
// items takes its turn after all the others'.
func (q *Queue[T]) Push(item T) {
	t := q.tenant(item)
	items, ok := q.items[t]
	if !ok {
		// Before the tenant whose turn it is: last in this round.
		q.turns = append(q.turns, "")
		copy(q.turns[q.next+1:], q.turns[q.next:])
		q.turns[q.next] = t
		q.next++
		if q.next == len(q.turns) {
			q.next = 0
		}
	}
	q.items[t] = append(items, item)
	q.n++
}

// Pop takes the first item of the tenant whose turn it is. It must not be
// called on an empty queue (workqueue.Typed checks Len first).
func (q *Queue[T]) Pop() T {
	t := q.turns[q.next]
	items := q.items[t]
	item := items[0]
	var zero T
	items[0] = zero
	if len(items) == 1 {
		delete(q.items, t)
		q.turns = append(q.turns[:q.next], q.turns[q.next+1:]...)
	} else {
		q.items[t] = items[1:]
		q.next++
	}
	if q.next >= len(q.turns) {
		q.next = 0
	}
	q.n--
	return item
}

// Len is the number of items, over all tenants.
func (q *Queue[T]) Len() int { return q.n }

// Namespace is the tenant of a reconcile request: its namespace.
func Namespace(r reconcile.Request) string { return r.Namespace }

// NewRateLimiting is a controller's queue (controller.Options.NewQueue)
// that takes turns between namespaces, with client-go's delays and rate
// limits.
func NewRateLimiting(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	order := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name, Queue: New(Namespace)})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Name: name, Queue: order})
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, DelayingQueue: delaying})
}
