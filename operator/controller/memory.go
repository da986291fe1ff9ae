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
// reconciles, one store per purpose, each keyed by the job's namespaced
// name. A store drops a job's entry as soon as it holds nothing, and forget
// drops the job from every store once it is gone, so the memory is bounded
// by the jobs in flight, not by the jobs ever seen.
type memory struct {
	// created: the children a reconcile created and waits to see in the
	// cache.
	created expectations
	// statusWrites: the status write the cache has not caught up with.
	statusWrites statusWrites
	// progress: when the job's last status write was sent, which spaces
	// the writes that only count progress.
	progress progressWrites
	// carried: the keys a restarted run carries over.
	carried carriedKeys
	// deadlines: the run last warned of its deadline.
	deadlines deadlineWarnings
	// conflicts: the back-off of a job whose child's name is taken.
	conflicts conflictBackoff
	// sandboxes: the last read of the kubelet's sandbox events.
	sandboxes sandboxReads
	// launchers: the last read of the running launcher's output.
	launchers launcherReads
	// runEnds: the first end the current run's pods showed.
	runEnds runEnds
	// costs: how long a large job's last reconcile took.
	costs reconcileCosts
	// keptKeys: the keys of an evicted run that a pod of the run after it
	// already uses (keysOfEvictedRun), by their Secret's UID.
	keptKeys perJob[types.UID]
}

// store is what memory needs of each of its stores.
type store interface {
	forget(job client.ObjectKey)
	len() int
}

// stores lists every store of m; a test holds it to memory's fields.
func (m *memory) stores() []store {
	return []store{&m.created, &m.statusWrites, &m.progress, &m.carried, &m.deadlines, &m.conflicts, &m.sandboxes, &m.launchers, &m.runEnds, &m.costs, &m.keptKeys}
}

// forget drops what is remembered of a job that is gone.
func (m *memory) forget(job client.ObjectKey) {
	for _, s := range m.stores() {
		s.forget(job)
	}
}

// entries is how many entries the stores hold in all.
func (m *memory) entries() int {
	n := 0
	for _, s := range m.stores() {
		n += s.len()
	}
	return n
}

// perJob holds one value per job, safe for concurrent reconciles.
type perJob[T any] struct {
	mu sync.Mutex
	m  map[client.ObjectKey]T
}

// update runs change on the job's value (the zero value and false when
// there is none) under the lock, and keeps what it returns, or drops the
// entry when keep is false.
func (p *perJob[T]) update(job client.ObjectKey, change func(v T, found bool) (next T, keep bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, found := p.m[job]
	next, keep := change(v, found)
	switch {
	case !keep:
		delete(p.m, job)
	case p.m == nil:
		p.m = map[client.ObjectKey]T{job: next}
	default:
		p.m[job] = next
	}
}

func (p *perJob[T]) get(job client.ObjectKey) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[job]
	return v, ok
}

func (p *perJob[T]) set(job client.ObjectKey, v T) {
	p.update(job, func(T, bool) (T, bool) { return v, true })
}

func (p *perJob[T]) forget(job client.ObjectKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, job)
}

func (p *perJob[T]) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// expectations maps each job to the kinds of children (a job has one of
// each) a reconcile created, with when and for what. The Job and ReplicaSet
// controllers keep such expectations too: another event (the job's own, a
// pod's) often brings the job back before the cache holds its new children,
// and the reconcile would create them again and be refused, or replace SSH
// keys it just made.
type expectations struct {
	perJob[map[string]expectation]
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

// expect records a child created for a job (and, for keys, a run).
func (e *expectations) expect(kind string, tj *trainer.TrainJob, run int32, now time.Time) {
	e.update(client.ObjectKeyFromObject(tj), func(made map[string]expectation, _ bool) (map[string]expectation, bool) {
		if made == nil {
			made = map[string]expectation{}
		}
		made[kind] = expectation{at: now, uid: tj.UID, run: run}
		return made, true
	})
}

// pending reports whether a child was created recently for this job (and,
// for keys, this run, or anyRun) and its watch event has not come yet.
// Callers then wait for it, and requeue after expectationTTL in case the
// child went before it was seen.
func (e *expectations) pending(kind string, tj *trainer.TrainJob, run int32, now time.Time) bool {
	var ok bool
	e.update(client.ObjectKeyFromObject(tj), func(made map[string]expectation, _ bool) (map[string]expectation, bool) {
		m, found := made[kind]
		if found && (now.Sub(m.at) > expectationTTL || m.uid != tj.UID) {
			delete(made, kind)
			return made, len(made) > 0
		}
		ok = found && (run == anyRun || m.run == run)
		return made, len(made) > 0
	})
	return ok
}

// seen forgets a child once the cache holds it, or once it is deleted.
func (e *expectations) seen(kind string, job client.ObjectKey) {
	e.update(job, func(made map[string]expectation, _ bool) (map[string]expectation, bool) {
		delete(made, kind)
		return made, len(made) > 0
	})
}

// observed reports whether a child that appeared in the cache is the one
// its TrainJob's reconcile created and waits for, and forgets it then.
func (e *expectations) observed(kind string, obj client.Object, run int32) bool {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.Kind != trainer.TrainJobKind {
		return false
	}
	var ok bool
	e.update(client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}, func(made map[string]expectation, _ bool) (map[string]expectation, bool) {
		m, found := made[kind]
		if ok = found && m.uid == owner.UID && m.run == run; ok {
			delete(made, kind)
		}
		return made, len(made) > 0
	})
	return ok
}

// statusWrites holds, for each job, the resourceVersion its last status
// patch replaced, until the cache shows a newer one (Reconcile).
type statusWrites struct{ perJob[string] }

// wrote records that a status patch replaced resourceVersion.
func (w *statusWrites) wrote(job client.ObjectKey, replaced string) { w.set(job, replaced) }

// behind reports whether the cache still holds the job as it was before
// the last status patch (at resourceVersion), and forgets the patch once
// the cache has moved past it.
func (w *statusWrites) behind(job client.ObjectKey, resourceVersion string) bool {
	var behind bool
	w.update(job, func(replaced string, found bool) (string, bool) {
		behind = found && replaced == resourceVersion
		return replaced, behind
	})
	return behind
}

// progressWrites holds when each job's last status patch was sent, for the
// interval after it in which a patch that only counts progress waits
// (writeStatus).
type progressWrites struct{ perJob[time.Time] }

// wait is how long a status patch that only counts progress must wait at
// now, and forgets a write older than interval.
func (p *progressWrites) wait(job client.ObjectKey, now time.Time, interval time.Duration) time.Duration {
	var wait time.Duration
	p.update(job, func(at time.Time, found bool) (time.Time, bool) {
		if !found {
			return at, false
		}
		if since := now.Sub(at); since < interval {
			wait = interval - since
			return at, true
		}
		return at, false
	})
	return wait
}

// wrote records a status patch of the job.
func (p *progressWrites) wrote(job client.ObjectKey, now time.Time) { p.set(job, now) }

// sandboxReads holds each job's last read of the kubelet's sandbox events,
// while it has pods waiting for their sandbox (sandboxFailures).
type sandboxReads struct{ perJob[*sandboxRead] }

// sandboxRead is when sandboxFailures last read the events, and what they
// explained.
type sandboxRead struct {
	at       time.Time
	findings []diagnosis.Finding
}

// last returns the job's last read of sandbox events if it is younger than
// maxAge at now.
func (r *sandboxReads) last(job client.ObjectKey, now time.Time, maxAge time.Duration) *sandboxRead {
	if read, ok := r.get(job); ok && now.Sub(read.at) < maxAge {
		return read
	}
	return nil
}

// read records a read of sandbox events; nil forgets the last once no pod
// of the job waits for its sandbox.
func (r *sandboxReads) read(job client.ObjectKey, read *sandboxRead) {
	r.update(job, func(*sandboxRead, bool) (*sandboxRead, bool) { return read, read != nil })
}

// carriedKeys holds the keys a restarted run takes, between deleting the
// old SSH Secret and creating the new one.
type carriedKeys struct{ perJob[carried] }

// carry keeps the keys a restarted run takes until its Secret exists.
func (c *carriedKeys) carry(job client.ObjectKey, keys carried) { c.set(job, keys) }

// carriedFor are the keys kept for this job (its UID) and run, if any.
func (c *carriedKeys) carriedFor(job client.ObjectKey, uid types.UID, run int32) *carried {
	if k, ok := c.get(job); ok && k.uid == uid && k.run == run {
		return &k
	}
	return nil
}

// drop forgets the carried keys once the new Secret exists.
func (c *carriedKeys) drop(job client.ObjectKey) { c.forget(job) }

// deadlineWarnings holds the run each job was last warned about its
// deadline in.
type deadlineWarnings struct{ perJob[string] }

// warn reports whether run has not been warned about its deadline yet, and
// records it as warned.
func (d *deadlineWarnings) warn(job client.ObjectKey, run string) bool {
	var first bool
	d.update(job, func(warned string, _ bool) (string, bool) {
		first = warned != run
		return run, true
	})
	return first
}

// conflictBackoff counts, for each job, the reconciles in a row that found
// a child's name taken.
type conflictBackoff struct{ perJob[int] }

// conflicted records one more reconcile that found a child's name taken,
// and returns when to look again: conflictRecheck, doubled with each
// conflict in a row up to maxConflictRecheck. A name stays taken until a
// person acts, and each look costs a create and a live read from the
// client budget every namespace shares.
func (c *conflictBackoff) conflicted(job client.ObjectKey) time.Duration {
	var n int
	c.update(job, func(count int, _ bool) (int, bool) {
		n = count + 1
		return n, true
	})
	d := conflictRecheck
	for i := 1; i < n && d < maxConflictRecheck; i++ {
		d *= 2
	}
	return min(d, maxConflictRecheck)
}

// unconflicted forgets a job's conflicts once its children are made.
func (c *conflictBackoff) unconflicted(job client.ObjectKey) { c.forget(job) }

// launcherReads holds each running job's last read of the end of its
// launcher's output (stallPhase).
type launcherReads struct{ perJob[launcherRead] }

// launcherRead is what the end of a launcher pod's output said when read.
type launcherRead struct {
	pod   types.UID
	at    time.Time
	quiet diagnosis.Quiet
	// err: the read failed; it is tried again when the read is due.
	err error
}

// last returns the job's last read of that launcher pod's output if it is
// younger than maxAge at now.
func (r *launcherReads) last(job client.ObjectKey, pod types.UID, now time.Time, maxAge time.Duration) (launcherRead, bool) {
	read, ok := r.get(job)
	return read, ok && read.pod == pod && now.Sub(read.at) < maxAge
}

// read records a read of a launcher's output.
func (r *launcherReads) read(job client.ObjectKey, read launcherRead) { r.set(job, read) }

// runEnds holds the earliest terminal finding each job's current run has
// shown: the pod that failed first may be gone (deleted, or its Job
// replaced by the JobSet's restart) by the time the restart is recorded,
// and the pods left are those the restart stopped after it.
type runEnds struct{ perJob[runEnd] }

// runEnd is a run's earliest terminal finding seen.
type runEnd struct {
	run     int32
	finding diagnosis.Finding
}

// saw keeps a terminal finding of run if it is the run's earliest yet.
func (r *runEnds) saw(job client.ObjectKey, run int32, f diagnosis.Finding) {
	r.update(job, func(v runEnd, found bool) (runEnd, bool) {
		if found && v.run == run && !f.At().Before(v.finding.At()) {
			return v, true
		}
		return runEnd{run: run, finding: f}, true
	})
}

// of returns the earliest terminal finding seen of run.
func (r *runEnds) of(job client.ObjectKey, run int32) (diagnosis.Finding, bool) {
	v, ok := r.get(job)
	return v.finding, ok && v.run == run
}

// reconcileCosts holds how long each job's last reconcile took, for the
// jobs whose reconciles take long enough to space their pods' events
// (spacing): a job's reconcile reads every one of its pods, so a job of
// thousands of pods, whose pods change many times a second while it
// starts, would otherwise be reconciled back to back.
type reconcileCosts struct{ perJob[time.Duration] }

// Spacing of a job's reconciles after its pods' changes. A change that may
// need words in the job's status (routinePodChange says which do not)
// waits podEventsDelay, or podEventsSpacing times the job's last reconcile,
// up to maxPodEventsDelay, which bounds how late a failure shows: a busy
// job's reconciles take at most a fifth of the operator's time for it. A
// step every pod of a starting job takes shows in the status only as a
// count, written at most every progressInterval: it waits
// routinePodEventsSpacing times the last reconcile, up to progressInterval,
// so that a large job's start takes at most a fiftieth of a core while a
// small job's status still follows its pods within podEventsDelay.
const (
	podEventsSpacing        = 4
	maxPodEventsDelay       = time.Second
	routinePodEventsSpacing = 50
)

// took records how long a reconcile of the job took; a job whose
// reconciles need no spacing keeps no entry.
func (c *reconcileCosts) took(job client.ObjectKey, d time.Duration) {
	c.update(job, func(time.Duration, bool) (time.Duration, bool) {
		return d, d*routinePodEventsSpacing > podEventsDelay
	})
}

// spacing is how long a change of the job's pods waits before the job is
// reconciled, for a routine change (routinePodChange) or another.
func (c *reconcileCosts) spacing(job client.ObjectKey, routine bool) time.Duration {
	d, _ := c.get(job)
	if routine {
		return min(max(podEventsDelay, d*routinePodEventsSpacing), progressInterval)
	}
	return min(max(podEventsDelay, d*podEventsSpacing), maxPodEventsDelay)
}
