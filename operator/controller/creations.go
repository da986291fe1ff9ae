package controller

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// creations remembers the children a reconcile created until the cache
// shows them, as the Job and ReplicaSet controllers do with their
// expectations. Another event (the job's own, a child's, a pod's) often
// brings the job back before the cache holds its new children: without
// this, the reconcile would create them again and be refused (hack/bench
// counted 409s for 0-2% of jobs), or replace SSH keys it had just made.
type creations struct {
	mu sync.Mutex
	// made maps a child, by its kind and its TrainJob (a job has one child
	// of each kind), to when and for what it was created.
	made map[child]creation
}

type creation struct {
	at time.Time
	// run is the JobSet restart count SSH keys were made for; zero for
	// the other kinds.
	run int32
}

type child struct {
	kind string
	job  client.ObjectKey
}

// The kinds of children tracked.
const (
	childJobSet    = "JobSet"
	childSecret    = "Secret"
	childConfigMap = "ConfigMap"
)

// creationTTL bounds the wait for a watch event: past it, the cache is
// trusted again (the child may have been deleted before it was seen).
const creationTTL = time.Minute

func (c *creations) created(kind string, job client.ObjectKey, run int32, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made == nil {
		c.made = map[child]creation{}
	}
	c.made[child{kind, job}] = creation{at: now, run: run}
}

// pending reports whether a child was created recently, for this run,
// and the cache has not shown it yet. Callers then wait for the child's watch event, and
// requeue after creationTTL in case the child went before it was seen.
func (c *creations) pending(kind string, job client.ObjectKey, run int32, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	made, ok := c.made[child{kind, job}]
	if ok && now.Sub(made.at) > creationTTL {
		delete(c.made, child{kind, job})
		return false
	}
	return ok && made.run == run
}

// seen forgets a child once the cache holds it.
func (c *creations) seen(kind string, job client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.made, child{kind, job})
}

// forget drops what is remembered of a job that is gone.
func (c *creations) forget(job client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, kind := range []string{childJobSet, childSecret, childConfigMap} {
		delete(c.made, child{kind, job})
	}
}
