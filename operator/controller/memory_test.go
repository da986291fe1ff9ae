package controller

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func trainJob(name string, uid types.UID) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
}

func TestCreationsPending(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	pi, other, again := trainJob("pi", "uid-1"), trainJob("other", "uid-2"), trainJob("pi", "uid-3")
	tests := map[string]struct {
		steps func(c *expectations)
		kind  string
		job   *trainer.TrainJob
		run   int32
		at    time.Time
		want  bool
	}{
		"nothing created":       {steps: func(*expectations) {}, kind: childJobSet, job: pi, at: t0},
		"created, unseen":       {steps: func(c *expectations) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: pi, at: t0.Add(time.Second), want: true},
		"another kind":          {steps: func(c *expectations) { c.expect(childJobSet, pi, 0, t0) }, kind: childSecret, job: pi, at: t0},
		"another job":           {steps: func(c *expectations) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: other, at: t0},
		"a namesake made again": {steps: func(c *expectations) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: again, at: t0},
		"seen in cache": {steps: func(c *expectations) {
			c.expect(childSecret, pi, 0, t0)
			c.seen(childSecret, client.ObjectKeyFromObject(pi))
		}, kind: childSecret, job: pi, at: t0},
		"past the TTL":        {steps: func(c *expectations) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: pi, at: t0.Add(expectationTTL + time.Second)},
		"at the TTL still":    {steps: func(c *expectations) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: pi, at: t0.Add(expectationTTL), want: true},
		"job gone":            {steps: func(c *expectations) { c.expect(childJobSet, pi, 0, t0); c.forget(client.ObjectKeyFromObject(pi)) }, kind: childJobSet, job: pi, at: t0},
		"keys of another run": {steps: func(c *expectations) { c.expect(childSecret, pi, 0, t0) }, kind: childSecret, job: pi, run: 1, at: t0},
		"keys of this run":    {steps: func(c *expectations) { c.expect(childSecret, pi, 1, t0) }, kind: childSecret, job: pi, run: 1, at: t0, want: true},
		"keys of any run":     {steps: func(c *expectations) { c.expect(childSecret, pi, 3, t0) }, kind: childSecret, job: pi, run: anyRun, at: t0, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c expectations
			tc.steps(&c)
			if got := c.pending(tc.kind, tc.job, tc.run, tc.at); got != tc.want {
				t.Errorf("pending(%s, %s, run %d) = %t, want %t", tc.kind, tc.job.Name, tc.run, got, tc.want)
			}
		})
	}
}

func TestCreationsObserved(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	pi := trainJob("pi", "uid-1")
	secret := func(owner *trainer.TrainJob, run string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: mpi.SSHSecretName("pi"),
			Annotations:     map[string]string{api.AnnotationJobSetRestarts: run},
			OwnerReferences: []metav1.OwnerReference{children.OwnerReference(owner)},
		}}
	}
	tests := map[string]struct {
		created bool
		run     int32
		obj     client.Object
		want    bool
	}{
		"keys it made":                {created: true, obj: secret(pi, "0"), want: true},
		"keys nobody waits for":       {obj: secret(pi, "0")},
		"keys of another run":         {created: true, run: 1, obj: secret(pi, "0")},
		"keys of a namesake job":      {created: true, obj: secret(trainJob("pi", "uid-9"), "0")},
		"keys without a TrainJob":     {created: true, obj: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi-mpi-ssh"}}},
		"a ConfigMap of the same job": {created: true, obj: &corev1.ConfigMap{ObjectMeta: secret(pi, "0").ObjectMeta}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c expectations
			if tc.created {
				c.expect(childSecret, pi, tc.run, t0)
			}
			kind := childSecret
			if _, ok := tc.obj.(*corev1.ConfigMap); ok {
				kind = childJobSet
			}
			if got := c.observed(kind, tc.obj, 0); got != tc.want {
				t.Errorf("observed = %t, want %t", got, tc.want)
			}
			if tc.want && c.pending(childSecret, pi, tc.run, t0) {
				t.Error("still pending after it was observed")
			}
		})
	}
}

// Everything kept of a job goes with it, from every store, and an entry
// that holds nothing goes at once: the memory is bounded by the jobs in
// flight, not by the jobs ever seen.
func TestMemoryForgets(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	pi := trainJob("pi", "uid-1")
	key := client.ObjectKeyFromObject(pi)
	var m memory
	fill := func() {
		m.created.expect(childJobSet, pi, 0, t0)
		m.statusWrites.wrote(key, "41")
		m.progress.wrote(key, t0)
		m.carried.carry(key, carried{uid: pi.UID, run: 1})
		m.deadlines.warn(key, "uid-1/0")
		m.conflicts.conflicted(key)
		m.sandboxes.read(key, &sandboxRead{at: t0})
		m.launchers.read(key, launcherRead{pod: "pod-uid", at: t0})
		m.runEnds.saw(key, 0, diagnosis.Finding{Reason: "Stopped"})
		m.costs.took(key, time.Second)
		m.keptKeys.set(key, "secret-uid")
	}
	fill()
	for _, s := range m.stores() {
		if s.len() != 1 {
			t.Fatalf("%T holds %d entries, want 1: fill every store", s, s.len())
		}
	}
	m.forget(key)
	if n := m.entries(); n != 0 {
		t.Errorf("forget left %d entries of the job", n)
	}

	m.created.expect(childSecret, pi, 0, t0)
	m.created.seen(childSecret, key)
	m.statusWrites.wrote(key, "41")
	if m.statusWrites.behind(key, "42") {
		t.Error("the cache moved past the status write, yet it is reported behind")
	}
	// A job whose reconciles need no spacing keeps no entry.
	m.costs.took(key, time.Second)
	m.costs.took(key, podEventsDelay/routinePodEventsSpacing)
	if n := m.entries(); n != 0 {
		t.Errorf("%d entries after everything was seen, want 0", n)
	}
}

// A job's pods' changes wait podEventsDelay, or a multiple of its last
// reconcile when that is longer: podEventsSpacing times it, never more than
// maxPodEventsDelay, or for a routine change routinePodEventsSpacing times
// it, never more than progressInterval.
func TestReconcileSpacing(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "big"}
	for _, tc := range []struct {
		took          time.Duration
		want, routine time.Duration
	}{
		{took: 0, want: podEventsDelay, routine: podEventsDelay},
		{took: 2 * time.Millisecond, want: podEventsDelay, routine: podEventsDelay},
		{took: 10 * time.Millisecond, want: podEventsDelay, routine: 500 * time.Millisecond},
		{took: 40 * time.Millisecond, want: podEventsDelay, routine: 2 * time.Second},
		{took: 100 * time.Millisecond, want: 400 * time.Millisecond, routine: progressInterval},
		{took: 200 * time.Millisecond, want: 800 * time.Millisecond, routine: progressInterval},
		{took: 5 * time.Second, want: maxPodEventsDelay, routine: progressInterval},
	} {
		var c reconcileCosts
		c.took(key, tc.took)
		if got := c.spacing(key, false); got != tc.want {
			t.Errorf("after a reconcile of %s: spacing %s, want %s", tc.took, got, tc.want)
		}
		if got := c.spacing(key, true); got != tc.routine {
			t.Errorf("after a reconcile of %s: spacing of a routine change %s, want %s", tc.took, got, tc.routine)
		}
	}
}

// stores lists every field of memory, so forget misses no store.
func TestMemoryStoresAreEveryField(t *testing.T) {
	var m memory
	listed := map[uintptr]bool{}
	for _, s := range m.stores() {
		listed[reflect.ValueOf(s).Pointer()] = true
	}
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		if !listed[v.Field(i).Addr().Pointer()] {
			t.Errorf("memory.%s is not in stores(): forget would keep it", v.Type().Field(i).Name)
		}
	}
}

func TestMemoryStatusBehind(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "pi"}
	var m statusWrites
	if m.behind(key, "41") {
		t.Error("behind with no status write")
	}
	m.wrote(key, "41")
	for range 2 {
		if !m.behind(key, "41") {
			t.Fatal("the cache at the replaced version is not behind, or stops being behind before it moves")
		}
	}
	if m.behind(key, "43") || m.behind(key, "41") {
		t.Error("once the cache moved past the write, nothing is behind")
	}
	if m.len() != 0 {
		t.Error("the entry outlived the write")
	}
}

func TestMemoryDeadlineWarnedOncePerRun(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "pi"}
	var m deadlineWarnings
	got := []bool{m.warn(key, "run-1"), m.warn(key, "run-1"), m.warn(key, "run-2"), m.warn(key, "run-2")}
	if diff := cmp.Diff([]bool{true, false, true, false}, got); diff != "" {
		t.Errorf("warnings (-want,+got):\n%s", diff)
	}
}

func TestMemoryCarriedKeys(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "pi"}
	keys := &mpi.SSHKeys{}
	var m carriedKeys
	m.carry(key, carried{uid: "uid-1", run: 2, keys: keys})
	tests := map[string]struct {
		uid  types.UID
		run  int32
		want *mpi.SSHKeys
	}{
		"this job's run":        {uid: "uid-1", run: 2, want: keys},
		"another run":           {uid: "uid-1", run: 3},
		"a namesake made again": {uid: "uid-2", run: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got *mpi.SSHKeys
			if c := m.carriedFor(key, tc.uid, tc.run); c != nil {
				got = c.keys
			}
			if got != tc.want {
				t.Errorf("carried keys = %p, want %p", got, tc.want)
			}
		})
	}
	m.drop(key)
	if m.len() != 0 {
		t.Error("the entry outlived the new Secret")
	}
}

func TestConflictsBackOff(t *testing.T) {
	var m conflictBackoff
	job := client.ObjectKey{Namespace: "ns", Name: "pi"}
	var got []time.Duration
	for range 7 {
		got = append(got, m.conflicted(job))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	m.unconflicted(job)
	if m.len() != 0 {
		t.Errorf("a job without conflicts keeps a record")
	}
	if d := m.conflicted(job); d != conflictRecheck {
		t.Errorf("after the children were made, the first wait is %v, want %v", d, conflictRecheck)
	}
	m.forget(job)
	if m.len() != 0 {
		t.Errorf("forget left a record")
	}
}

// TestSandboxReads: a job's read of sandbox events serves its reconciles
// for sandboxRecheck, and is forgotten, record and all, once no pod waits.
func TestSandboxReads(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	pi, other := client.ObjectKey{Namespace: "ns", Name: "pi"}, client.ObjectKey{Namespace: "ns", Name: "other"}
	var m sandboxReads
	if m.last(pi, t0, sandboxRecheck) != nil {
		t.Fatal("a read before any was made")
	}
	m.read(pi, &sandboxRead{at: t0})
	for _, tc := range []struct {
		job  client.ObjectKey
		at   time.Time
		want bool
	}{
		{pi, t0.Add(sandboxRecheck - time.Second), true},
		{pi, t0.Add(sandboxRecheck), false},
		{other, t0, false},
	} {
		if got := m.last(tc.job, tc.at, sandboxRecheck) != nil; got != tc.want {
			t.Errorf("%s at +%s: a read to reuse %t, want %t", tc.job.Name, tc.at.Sub(t0), got, tc.want)
		}
	}
	m.read(pi, nil)
	if n := m.len(); n != 0 {
		t.Errorf("%d records kept once no pod waits", n)
	}
}

// A job's progress-only status patches wait the interval after its last
// status patch, and the record of that patch goes once the interval has
// passed.
func TestProgressWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pi, other := client.ObjectKey{Namespace: "ns", Name: "pi"}, client.ObjectKey{Namespace: "ns", Name: "other"}
	var m progressWrites
	if w := m.wait(pi, t0, progressInterval); w != 0 {
		t.Fatalf("a wait of %s before any status was written", w)
	}
	m.wrote(pi, t0)
	for _, tc := range []struct {
		job  client.ObjectKey
		at   time.Time
		want time.Duration
	}{
		{pi, t0.Add(300 * time.Millisecond), progressInterval - 300*time.Millisecond},
		{other, t0.Add(300 * time.Millisecond), 0},
		{pi, t0.Add(progressInterval), 0},
	} {
		if got := m.wait(tc.job, tc.at, progressInterval); got != tc.want {
			t.Errorf("%s at +%s: wait %s, want %s", tc.job.Name, tc.at.Sub(t0), got, tc.want)
		}
	}
	if n := m.len(); n != 0 {
		t.Errorf("%d records kept once the interval passed", n)
	}
}
