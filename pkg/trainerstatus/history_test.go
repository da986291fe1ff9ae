package trainerstatus

import (
	"fmt"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
)

func TestHistoryAdd(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	loss := func(v string) []trainer.Metric { return []trainer.Metric{{Name: "loss", Value: v}} }
	tests := []struct {
		name    string
		reports func(h *History)
		want    string
	}{
		{"in time order, whatever order they come in", func(h *History) {
			h.Add(at(20), loss("2"))
			h.Add(at(10), loss("1"))
			h.Add(at(30), loss("3"))
		}, "loss:10=1,20=2,30=3"},
		{"a second value at one time replaces the first", func(h *History) {
			h.Add(at(10), loss("1"))
			h.Add(at(10), loss("0.5"))
		}, "loss:10=0.5"},
		{"only finite numbers", func(h *History) {
			h.Add(at(10), []trainer.Metric{{Name: "loss", Value: "0.5"}, {Name: "phase", Value: "warmup"}, {Name: "grad", Value: "NaN"}, {Name: "lr", Value: "+Inf"}, {Name: "acc", Value: "1e-3"}})
		}, "loss:10=0.5 acc:10=0.001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h History
			tt.reports(&h)
			var got []string
			for _, s := range h.Series {
				var pts []string
				for _, p := range s.Points {
					pts = append(pts, fmt.Sprintf("%d=%g", p.Time, p.Value))
				}
				got = append(got, s.Name+":"+strings.Join(pts, ","))
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("got %q, want %q", g, tt.want)
			}
		})
	}
}

// A history follows the first HistoryMetrics metrics and no later one.
func TestHistoryFollowsFirstMetrics(t *testing.T) {
	var h History
	var ms []trainer.Metric
	for i := range HistoryMetrics + 3 {
		ms = append(ms, trainer.Metric{Name: fmt.Sprintf("m%02d", i), Value: "1"})
	}
	h.Add(time.Unix(10, 0), ms)
	h.Add(time.Unix(20, 0), []trainer.Metric{{Name: "late", Value: "1"}})
	if len(h.Series) != HistoryMetrics || h.Series[0].Name != "m00" || h.Series[HistoryMetrics-1].Name != fmt.Sprintf("m%02d", HistoryMetrics-1) {
		t.Errorf("got %d series, first %s, want m00 to m%02d", len(h.Series), h.Series[0].Name, HistoryMetrics-1)
	}
}

// A metric reported for longer than its points hold keeps points that span
// the whole run: the first, the latest, and at most HistoryPoints.
func TestHistoryThins(t *testing.T) {
	var h History
	const reports = 10 * HistoryPoints
	for i := range reports {
		h.Add(time.Unix(int64(i), 0), []trainer.Metric{{Name: "loss", Value: fmt.Sprint(i)}})
		if n := len(h.Series[0].Points); n > HistoryPoints {
			t.Fatalf("after %d reports the history holds %d points, more than %d", i+1, n, HistoryPoints)
		}
	}
	pts := h.Series[0].Points
	if pts[0].Time != 0 || pts[len(pts)-1].Time != reports-1 {
		t.Errorf("points span %d to %d, want 0 to %d", pts[0].Time, pts[len(pts)-1].Time, reports-1)
	}
	if len(pts) < HistoryPoints/2 {
		t.Errorf("%d points left, want at least %d", len(pts), HistoryPoints/2)
	}
}

// Anyone who may write ConfigMaps in a namespace may write a history: what
// is read is held to the bounds of what the server writes.
func TestParseHistoryBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"series":[`)
	for i := range 3 * HistoryMetrics {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"m%d","points":[`, i%(2*HistoryMetrics))
		for j := range 3 * HistoryPoints {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"t":%d,"v":%d}`, j, j)
		}
		b.WriteString("]}")
	}
	fmt.Fprintf(&b, `,{"name":%q,"points":[]}]}`, strings.Repeat("n", MaxMetricName+1))
	h, err := ParseHistory(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Series) != HistoryMetrics {
		t.Errorf("%d series kept, want %d", len(h.Series), HistoryMetrics)
	}
	seen := map[string]bool{}
	for _, s := range h.Series {
		if seen[s.Name] {
			t.Errorf("series %s kept twice", s.Name)
		}
		seen[s.Name] = true
		if len(s.Points) > HistoryPoints {
			t.Errorf("series %s holds %d points, more than %d", s.Name, len(s.Points), HistoryPoints)
		}
	}
	if _, err := ParseHistory("not json"); err == nil {
		t.Error("a history that is not JSON was read")
	}
	if back, err := ParseHistory(h.Encode()); err != nil || len(back.Series) != len(h.Series) {
		t.Errorf("an encoded history reads back as %d series (%v), want %d", len(back.Series), err, len(h.Series))
	}
}
