package trainjob

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The record of a job's restarts reads back as written, whether each
// restart counted or is not known to have, and a cause too long is cut.
func TestRestartsRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rec := Restarts{Total: 12, Counted: 2, Budget: 3, Latest: []Restart{
		{Run: 9, At: at, Counted: ptr.To(false), Cause: "worker-1 (ranks 2-3) EvictionByEvictionAPI: it was evicted: (Eviction API: evicting)"},
		{Run: 10, At: at.Add(time.Hour), Counted: ptr.To(true), Cause: "launcher Error: container node exited with code 3"},
		{Run: 11, At: at.Add(2 * time.Hour), Cause: "Torus did not see why: the run's pods were gone when it looked"},
	}}
	msg := rec.Message()
	if !strings.HasPrefix(msg, "12 restarts, 2 counted against the budget of 3\nrun 9 stopped 2026-11-29T10:00:00Z (not counted): worker-1") ||
		!strings.Contains(msg, "\nrun 11 stopped 2026-11-29T12:00:00Z: Torus did not see why") {
		t.Errorf("message:\n%s", msg)
	}
	tj := &trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{{Type: ConditionRestarted, Status: metav1.ConditionTrue, Message: msg}}}}
	if diff := cmp.Diff(rec, RestartsOf(tj)); diff != "" {
		t.Errorf("read back (-written +read):\n%s", diff)
	}
	if got := RestartsOf(tj).Recorded(); got != 12 {
		t.Errorf("Recorded = %d, want 12", got)
	}
	long := Restart{Run: 0, At: at, Cause: strings.Repeat("x", 2*maxCause)}
	if l := long.String(); len(l) > maxCause+100 || !strings.HasSuffix(l, "…") {
		t.Errorf("a long cause is kept whole: %d bytes", len(l))
	}
	if (Restarts{}).Recorded() != 0 || RestartsOf(&trainer.TrainJob{}).Total != 0 {
		t.Error("a job that never restarted has a record")
	}
}

// Kueue's evictions are kept beside the JobSet's restarts: counted apart,
// never against the budget, read back as written, and neither taken for a
// restart the record has seen nor weighed in the back-off.
func TestRestartsEvictions(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var rec Restarts
	rec.Budget = 2
	rec.Evict(0, at, "Preempted: Preempted to accommodate a workload (UID: 1) due to prioritization in the ClusterQueue")
	if got := rec.Recorded(); got != 0 {
		t.Errorf("after an eviction of run 0, Recorded = %d, want 0", got)
	}
	rec.Total = 1
	rec.Latest = append(rec.Latest, Restart{Run: 0, At: at.Add(time.Minute), Counted: ptr.To(false), Cause: "worker-0 lost"})
	rec.Evict(1, at.Add(2*time.Minute), "Preempted: again")
	msg := rec.Message()
	for _, want := range []string{
		"1 restart, 0 counted against the budget of 2, evicted by Kueue 2 times\n",
		"\nrun 0 stopped 2026-11-29T10:00:00Z (evicted by Kueue): Preempted: Preempted to accommodate",
		"\nrun 1 stopped 2026-11-29T10:02:00Z (evicted by Kueue): Preempted: again",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	tj := &trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{{Type: ConditionRestarted, Status: metav1.ConditionTrue, Message: msg}}}}
	read := RestartsOf(tj)
	if diff := cmp.Diff(rec, read); diff != "" {
		t.Errorf("read back (-written +read):\n%s", diff)
	}
	if read.Recorded() != 1 || read.Stops() != 3 {
		t.Errorf("Recorded = %d, Stops = %d; want 1, 3", read.Recorded(), read.Stops())
	}
	if last, ok := read.LatestRestart(); !ok || last.Cause != "worker-0 lost" {
		t.Errorf("LatestRestart = %+v, %v", last, ok)
	}
	// A restart not the program's between evictions stands alone: no
	// back-off, though three stops in a row were not the program's.
	if wait, streak := read.Backoff(); wait != 0 || streak != 1 {
		t.Errorf("Backoff() = %s, streak %d; want 0, 1", wait, streak)
	}
	// The record keeps the latest ends, evictions among them.
	for i := range MaxRestartsKept + 3 {
		read.Evict(1, at.Add(time.Duration(i+3)*time.Minute), "again")
	}
	if len(read.Latest) != MaxRestartsKept || read.Evictions != MaxRestartsKept+5 || read.Recorded() != 1 {
		t.Errorf("after many evictions: %d kept, %d evictions, Recorded %d", len(read.Latest), read.Evictions, read.Recorded())
	}
}

func TestRestartsBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	yes, no := ptr.To(true), ptr.To(false)
	// runs makes restarts whose runs lasted each of lasted, counted or not.
	runs := func(counted []*bool, lasted ...time.Duration) Restarts {
		var r Restarts
		at := t0
		for i, c := range counted {
			at = at.Add(lasted[i])
			r.Latest = append(r.Latest, Restart{Run: int32(i), At: at, Counted: c})
		}
		return r
	}
	minute := time.Minute
	tests := []struct {
		name       string
		record     Restarts
		wantWait   time.Duration
		wantStreak int
	}{
		{name: "no restart", record: Restarts{}, wantWait: 0, wantStreak: 0},
		{name: "one not the program's: at once", record: runs([]*bool{no}, minute), wantWait: 0, wantStreak: 1},
		{name: "the program's own failures never back off", record: runs([]*bool{yes, yes, yes}, minute, minute, minute), wantWait: 0},
		{name: "two in a row", record: runs([]*bool{no, no}, minute, minute), wantWait: 10 * time.Second, wantStreak: 2},
		{name: "four in a row", record: runs([]*bool{no, no, no, no}, minute, minute, minute, minute), wantWait: 40 * time.Second, wantStreak: 4},
		{name: "ten in a row, capped", record: runs([]*bool{no, no, no, no, no, no, no, no, no, no},
			minute, minute, minute, minute, minute, minute, minute, minute, minute, minute), wantWait: RestartBackoffMax, wantStreak: 10},
		{name: "a counted restart ends the streak", record: runs([]*bool{no, no, yes, no}, minute, minute, minute, minute), wantWait: 0, wantStreak: 1},
		{name: "an unknown one ends it too", record: runs([]*bool{no, nil, no, no}, minute, minute, minute, minute), wantWait: 10 * time.Second, wantStreak: 2},
		{name: "a run that lasted ends it", record: runs([]*bool{no, no, no}, minute, minute, 10*minute), wantWait: 0, wantStreak: 1},
		{name: "only the runs after the long one count", record: runs([]*bool{no, no, no, no}, minute, 10*minute, minute, minute), wantWait: 20 * time.Second, wantStreak: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wait, streak := tc.record.Backoff()
			if wait != tc.wantWait || (tc.wantStreak != 0 && streak != tc.wantStreak) {
				t.Errorf("Backoff() = %s, streak %d; want %s, streak %d", wait, streak, tc.wantWait, tc.wantStreak)
			}
		})
	}
}
