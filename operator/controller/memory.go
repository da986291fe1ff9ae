package controller

import (
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/diagnosis"
)

// memory is what the reconciler keeps of each TrainJob between its
// reconciles, keyed by the job's namespaced name: the children a reconcile
// created and waits to see in the cache, the status write the cache has not
// caught up with, the keys a restarted run carries over, and the run last
// warned of its deadline. forget drops all of it when the job is gone; a
// job's record goes as soon as it holds nothing.
type memory struct {
	mu   sync.Mutex
	jobs map[client.ObjectKey]*jobMemory
}

// jobMemory is one TrainJob's record.
type jobMemory struct {
	// made maps a kind of child (a job has one of each) to when and for
	// what it was created. The Job and ReplicaSet controllers keep such
	// expectations too: another event (the job's own, a pod's) often
	// brings the job back before the cache holds its new children, and
	// the reconcile would create them again and be refused (hack/bench
	// counted 409s for 0-2% of jobs), or replace SSH keys it just made.
	made map[string]expectation
	// statusReplaced is the resourceVersion the last status patch
	// replaced, until the cache shows a newer one (Reconcile).
	statusReplaced string
	// carried are the keys a restarted run takes, between deleting the old
	// SSH Secret and creating the new one.
	carried *carried
	// deadlineWarned is the run last warned about its deadline.
	deadlineWarned string
	// conflicts counts the reconciles in a row that found a child's name
	// taken, for the back-off of conflictRecheck.
	conflicts int
	// sandbox is the last read of the kubelet's sandbox events, while
	// the job has pods waiting for their sandbox (sandboxFailures).
	sandbox *sandboxRead
	// progressAt is when a status patch that only counted progress was
	// last sent, for progressInterval after it (writeStatus).
	progressAt time.Time
}

// sandboxRead is when sandboxFailures last read the events, and what they
// explained.
type sandboxRead struct {
	at       time.Time
	findings []diagnosis.Finding
}

func (j *jobMemory) empty() bool {
	return len(j.made) == 0 && j.statusReplaced == "" && j.carried == nil && j.deadlineWarned == "" && j.conflicts == 0 && j.sandbox == nil && j.progressAt.IsZero()
}

type expectation struct {
	at time.Time
	// uid is the TrainJob's: a job deleted and made again under the same
	// name expects nothing of its namesake.
	uid types.UID
	// run is the JobSet restart count SSH keys were made for; zero for
	// the other kinds.
	run int32
}

// The kinds of children expected.
const (
	childJobSet        = "JobSet"
	childSecret        = "Secret"
	childNetworkPolicy = "NetworkPolicy"
)

// anyRun matches SSH keys made for any run.
const anyRun = -1

// expectationTTL bounds the wait for a watch event: past it, the cache is
// trusted again (the child may have been deleted before it was seen).
const expectationTTL = time.Minute

// update runs change on a job's record, made if needed, under the lock,
// and drops the record once it holds nothing.
func (m *memory) update(job client.ObjectKey, change func(*jobMemory)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[job]
	if j == nil {
		j = &jobMemory{}
	}
	change(j)
	switch {
	case j.empty():
		delete(m.jobs, job)
	case m.jobs == nil:
		m.jobs = map[client.ObjectKey]*jobMemory{job: j}
	default:
		m.jobs[job] = j
	}
}

// forget drops what is remembered of a job that is gone.
func (m *memory) forget(job client.ObjectKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.jobs, job)
}

// len is how many jobs have a record.
func (m *memory) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// expect records a child created for a job (and, for keys, a run).
func (m *memory) expect(kind string, tj *trainer.TrainJob, run int32, now time.Time) {
	m.update(client.ObjectKeyFromObject(tj), func(j *jobMemory) {
		if j.made == nil {
			j.made = map[string]expectation{}
		}
		j.made[kind] = expectation{at: now, uid: tj.UID, run: run}
	})
}

// pending reports whether a child was created recently for this job (and,
// for keys, this run, or anyRun) and its watch event has not come yet.
// Callers then wait for it, and requeue after expectationTTL in case the
// child went before it was seen.
func (m *memory) pending(kind string, tj *trainer.TrainJob, run int32, now time.Time) bool {
	var ok bool
	m.update(client.ObjectKeyFromObject(tj), func(j *jobMemory) {
		made, found := j.made[kind]
		if found && (now.Sub(made.at) > expectationTTL || made.uid != tj.UID) {
			delete(j.made, kind)
			return
		}
		ok = found && (run == anyRun || made.run == run)
	})
	return ok
}

// seen forgets a child once the cache holds it, or once it is deleted.
func (m *memory) seen(kind string, job client.ObjectKey) {
	m.update(job, func(j *jobMemory) { delete(j.made, kind) })
}

// observed reports whether a child that appeared in the cache is the one
// its TrainJob's reconcile created and waits for, and forgets it then.
func (m *memory) observed(kind string, obj client.Object, run int32) bool {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.Kind != trainer.TrainJobKind {
		return false
	}
	var ok bool
	m.update(client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}, func(j *jobMemory) {
		made, found := j.made[kind]
		if ok = found && made.uid == owner.UID && made.run == run; ok {
			delete(j.made, kind)
		}
	})
	return ok
}

// wroteStatus records that a status patch replaced resourceVersion.
func (m *memory) wroteStatus(job client.ObjectKey, replaced string) {
	m.update(job, func(j *jobMemory) { j.statusReplaced = replaced })
}

// statusBehind reports whether the cache still holds the job as it was
// before the last status patch (at resourceVersion), and forgets the patch
// once the cache has moved past it.
func (m *memory) statusBehind(job client.ObjectKey, resourceVersion string) bool {
	var behind bool
	m.update(job, func(j *jobMemory) {
		if j.statusReplaced == "" {
			return
		}
		if behind = j.statusReplaced == resourceVersion; !behind {
			j.statusReplaced = ""
		}
	})
	return behind
}

// progressWait is how long a status patch that only counts progress must
// wait at now, and forgets a progress write older than interval.
func (m *memory) progressWait(job client.ObjectKey, now time.Time, interval time.Duration) time.Duration {
	var wait time.Duration
	m.update(job, func(j *jobMemory) {
		if j.progressAt.IsZero() {
			return
		}
		if since := now.Sub(j.progressAt); since < interval {
			wait = interval - since
			return
		}
		j.progressAt = time.Time{}
	})
	return wait
}

// wroteProgress records a status patch that only counted progress.
func (m *memory) wroteProgress(job client.ObjectKey, now time.Time) {
	m.update(job, func(j *jobMemory) { j.progressAt = now })
}

// lastSandboxRead returns the job's last read of sandbox events if it is
// younger than maxAge at now.
func (m *memory) lastSandboxRead(job client.ObjectKey, now time.Time, maxAge time.Duration) *sandboxRead {
	var r *sandboxRead
	m.update(job, func(j *jobMemory) {
		if j.sandbox != nil && now.Sub(j.sandbox.at) < maxAge {
			r = j.sandbox
		}
	})
	return r
}

// readSandbox records a read of sandbox events; nil forgets the last once
// no pod of the job waits for its sandbox.
func (m *memory) readSandbox(job client.ObjectKey, r *sandboxRead) {
	m.update(job, func(j *jobMemory) { j.sandbox = r })
}

// carry keeps the keys a restarted run takes until its Secret exists.
func (m *memory) carry(job client.ObjectKey, c carried) {
	m.update(job, func(j *jobMemory) { j.carried = &c })
}

// carriedFor are the keys kept for this job (its UID) and run, if any.
func (m *memory) carriedFor(job client.ObjectKey, uid types.UID, run int32) *carried {
	var c *carried
	m.update(job, func(j *jobMemory) {
		if j.carried != nil && j.carried.uid == uid && j.carried.run == run {
			c = j.carried
		}
	})
	return c
}

// dropCarried forgets the carried keys once the new Secret exists.
func (m *memory) dropCarried(job client.ObjectKey) {
	m.update(job, func(j *jobMemory) { j.carried = nil })
}

// warnDeadline reports whether run has not been warned about its deadline
// yet, and records it as warned.
func (m *memory) warnDeadline(job client.ObjectKey, run string) bool {
	var first bool
	m.update(job, func(j *jobMemory) {
		if first = j.deadlineWarned != run; first {
			j.deadlineWarned = run
		}
	})
	return first
}

// conflicted records one more reconcile that found a child's name taken,
// and returns when to look again: conflictRecheck, doubled with each
// conflict in a row up to maxConflictRecheck. A name stays taken until a
// person acts, and each look costs a create and a live read from the
// client budget every namespace shares.
func (m *memory) conflicted(job client.ObjectKey) time.Duration {
	var n int
	m.update(job, func(j *jobMemory) {
		j.conflicts++
		n = j.conflicts
	})
	d := conflictRecheck
	for i := 1; i < n && d < maxConflictRecheck; i++ {
		d *= 2
	}
	return min(d, maxConflictRecheck)
}

// unconflicted forgets a job's conflicts once its children are made.
func (m *memory) unconflicted(job client.ObjectKey) {
	m.update(job, func(j *jobMemory) { j.conflicts = 0 })
}
