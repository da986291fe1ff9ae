package controller

import (
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
	"github.com/torus-mpi/torus/pkg/mpi"
)

func trainJob(name string, uid types.UID) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
}

func TestCreationsPending(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	pi, other, again := trainJob("pi", "uid-1"), trainJob("other", "uid-2"), trainJob("pi", "uid-3")
	tests := map[string]struct {
		steps func(c *memory)
		kind  string
		job   *trainer.TrainJob
		run   int32
		at    time.Time
		want  bool
	}{
		"nothing created":       {steps: func(*memory) {}, kind: childJobSet, job: pi, at: t0},
		"created, unseen":       {steps: func(c *memory) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: pi, at: t0.Add(time.Second), want: true},
		"another kind":          {steps: func(c *memory) { c.expect(childJobSet, pi, 0, t0) }, kind: childSecret, job: pi, at: t0},
		"another job":           {steps: func(c *memory) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: other, at: t0},
		"a namesake made again": {steps: func(c *memory) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: again, at: t0},
		"seen in cache": {steps: func(c *memory) {
			c.expect(childSecret, pi, 0, t0)
			c.seen(childSecret, client.ObjectKeyFromObject(pi))
		}, kind: childSecret, job: pi, at: t0},
		"past the TTL":        {steps: func(c *memory) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: pi, at: t0.Add(expectationTTL + time.Second)},
		"at the TTL still":    {steps: func(c *memory) { c.expect(childJobSet, pi, 0, t0) }, kind: childJobSet, job: pi, at: t0.Add(expectationTTL), want: true},
		"job gone":            {steps: func(c *memory) { c.expect(childJobSet, pi, 0, t0); c.forget(client.ObjectKeyFromObject(pi)) }, kind: childJobSet, job: pi, at: t0},
		"keys of another run": {steps: func(c *memory) { c.expect(childSecret, pi, 0, t0) }, kind: childSecret, job: pi, run: 1, at: t0},
		"keys of this run":    {steps: func(c *memory) { c.expect(childSecret, pi, 1, t0) }, kind: childSecret, job: pi, run: 1, at: t0, want: true},
		"keys of any run":     {steps: func(c *memory) { c.expect(childSecret, pi, 3, t0) }, kind: childSecret, job: pi, run: anyRun, at: t0, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c memory
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
			var c memory
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

// Everything kept of a job goes with it, and a record that holds nothing
// goes at once: the memory is bounded by the jobs in flight, not by the jobs
// ever seen.
func TestMemoryForgets(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	pi := trainJob("pi", "uid-1")
	key := client.ObjectKeyFromObject(pi)
	var m memory
	m.expect(childJobSet, pi, 0, t0)
	m.wroteStatus(key, "41")
	m.carry(key, carried{uid: pi.UID, run: 1})
	m.warnDeadline(key, "uid-1/0")
	if m.len() != 1 {
		t.Fatalf("records = %d, want 1", m.len())
	}
	m.forget(key)
	if m.len() != 0 || m.pending(childJobSet, pi, 0, t0) || m.statusBehind(key, "41") || m.carriedFor(key, pi.UID, 1) != nil {
		t.Error("forget left something of the job")
	}

	m.expect(childSecret, pi, 0, t0)
	m.seen(childSecret, key)
	m.wroteStatus(key, "41")
	if m.statusBehind(key, "42") {
		t.Error("the cache moved past the status write, yet it is reported behind")
	}
	if m.len() != 0 {
		t.Errorf("records = %d after everything was seen, want 0", m.len())
	}
}

func TestMemoryStatusBehind(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "pi"}
	var m memory
	if m.statusBehind(key, "41") {
		t.Error("behind with no status write")
	}
	m.wroteStatus(key, "41")
	for range 2 {
		if !m.statusBehind(key, "41") {
			t.Fatal("the cache at the replaced version is not behind, or stops being behind before it moves")
		}
	}
	if m.statusBehind(key, "43") || m.statusBehind(key, "41") {
		t.Error("once the cache moved past the write, nothing is behind")
	}
}

func TestMemoryDeadlineWarnedOncePerRun(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "pi"}
	var m memory
	got := []bool{m.warnDeadline(key, "run-1"), m.warnDeadline(key, "run-1"), m.warnDeadline(key, "run-2"), m.warnDeadline(key, "run-2")}
	if diff := cmp.Diff([]bool{true, false, true, false}, got); diff != "" {
		t.Errorf("warnings (-want,+got):\n%s", diff)
	}
}

func TestMemoryCarriedKeys(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "pi"}
	keys := &mpi.SSHKeys{}
	var m memory
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
	m.dropCarried(key)
	if m.len() != 0 {
		t.Error("the record outlived its last piece")
	}
}

func TestConflictsBackOff(t *testing.T) {
	var m memory
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
	var m memory
	if m.lastSandboxRead(pi, t0, sandboxRecheck) != nil {
		t.Fatal("a read before any was made")
	}
	m.readSandbox(pi, &sandboxRead{at: t0})
	for _, tc := range []struct {
		job  client.ObjectKey
		at   time.Time
		want bool
	}{
		{pi, t0.Add(sandboxRecheck - time.Second), true},
		{pi, t0.Add(sandboxRecheck), false},
		{other, t0, false},
	} {
		if got := m.lastSandboxRead(tc.job, tc.at, sandboxRecheck) != nil; got != tc.want {
			t.Errorf("%s at +%s: a read to reuse %t, want %t", tc.job.Name, tc.at.Sub(t0), got, tc.want)
		}
	}
	m.readSandbox(pi, nil)
	if n := m.len(); n != 0 {
		t.Errorf("%d records kept once no pod waits", n)
	}
}

// A job's progress-only status patches are spaced by the interval, and the
// record of the last goes once the interval has passed.
func TestProgressWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pi, other := client.ObjectKey{Namespace: "ns", Name: "pi"}, client.ObjectKey{Namespace: "ns", Name: "other"}
	var m memory
	if w := m.progressWait(pi, t0, progressInterval); w != 0 {
		t.Fatalf("a wait of %s before any progress was written", w)
	}
	m.wroteProgress(pi, t0)
	for _, tc := range []struct {
		job  client.ObjectKey
		at   time.Time
		want time.Duration
	}{
		{pi, t0.Add(300 * time.Millisecond), 700 * time.Millisecond},
		{other, t0.Add(300 * time.Millisecond), 0},
		{pi, t0.Add(progressInterval), 0},
	} {
		if got := m.progressWait(tc.job, tc.at, progressInterval); got != tc.want {
			t.Errorf("%s at +%s: wait %s, want %s", tc.job.Name, tc.at.Sub(t0), got, tc.want)
		}
	}
	if n := m.len(); n != 0 {
		t.Errorf("%d records kept once the interval passed", n)
	}
}
