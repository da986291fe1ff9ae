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
