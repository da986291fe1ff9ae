package trainerstatus

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
)

// A job's metrics over its run are kept in a ConfigMap of the job's
// namespace that the job controls, so that they live as long as the job,
// go with it, and are read with the job's own RBAC: the status server
// writes it at most once per write interval, with the status.
const (
	// HistoryKey is the ConfigMap's key holding the History as JSON.
	HistoryKey = "history.json"
	// HistoryMetrics bounds the metrics a history follows: the first
	// ones a program reports with a numeric value.
	HistoryMetrics = 16
	// HistoryPoints bounds each metric's points. A metric that has as
	// many drops every other of its older points, so that its points
	// always span the whole run, twice as sparse.
	HistoryPoints = 120
)

// HistoryName is the ConfigMap holding job name's history.
func HistoryName(name string) string { return name + "-metrics-history" }

// History is a job's numeric metrics over its run.
type History struct {
	Series []Series `json:"series"`
}

// Series is one metric's values, oldest first.
type Series struct {
	Name   string  `json:"name"`
	Points []Point `json:"points"`
}

// Point is a metric's value at a time, in whole seconds since the epoch:
// the time the server took the report.
type Point struct {
	Time  int64   `json:"t"`
	Value float64 `json:"v"`
}

// Add records the report's numeric metrics at time at; a metric whose value
// is not a finite number, or that comes beyond the first HistoryMetrics, is
// not followed. Points stay in time order; a second value at the same time
// replaces the first.
func (h *History) Add(at time.Time, metrics []trainer.Metric) {
	t := at.Unix()
	for _, m := range metrics {
		v, err := strconv.ParseFloat(m.Value, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		i := slices.IndexFunc(h.Series, func(s Series) bool { return s.Name == m.Name })
		if i < 0 {
			if len(h.Series) >= HistoryMetrics {
				continue
			}
			h.Series = append(h.Series, Series{Name: m.Name})
			i = len(h.Series) - 1
		}
		h.Series[i].add(Point{Time: t, Value: v})
	}
}

func (s *Series) add(p Point) {
	i, found := slices.BinarySearchFunc(s.Points, p.Time, func(q Point, t int64) int { return cmp.Compare(q.Time, t) })
	if found {
		s.Points[i] = p
		return
	}
	s.Points = slices.Insert(s.Points, i, p)
	if len(s.Points) > HistoryPoints {
		s.thin()
	}
}

// thin halves the points: every other one goes, the latest stays.
func (s *Series) thin() {
	last := s.Points[len(s.Points)-1]
	kept := s.Points[:0]
	for i := 0; i < len(s.Points)-1; i += 2 {
		kept = append(kept, s.Points[i])
	}
	s.Points = append(kept, last)
}

// ParseHistory reads a history as HistoryKey holds it. Whoever may write
// ConfigMaps in the job's namespace may write one, so what is read is
// held to the same bounds as what the server writes.
func ParseHistory(data string) (History, error) {
	var h History
	if err := json.Unmarshal([]byte(data), &h); err != nil {
		return History{}, fmt.Errorf("reading a metrics history: %w", err)
	}
	var bounded History
	for _, s := range h.Series {
		if s.Name == "" || len(s.Name) > MaxMetricName || slices.ContainsFunc(bounded.Series, func(b Series) bool { return b.Name == s.Name }) {
			continue
		}
		if len(bounded.Series) == HistoryMetrics {
			break
		}
		b := Series{Name: s.Name}
		for _, p := range s.Points {
			if !math.IsInf(p.Value, 0) && !math.IsNaN(p.Value) {
				b.add(p)
			}
		}
		bounded.Series = append(bounded.Series, b)
	}
	return bounded, nil
}

// Encode is the history as HistoryKey holds it.
func (h History) Encode() string {
	b, err := json.Marshal(h)
	if err != nil {
		panic(err) // numbers and strings only
	}
	return string(b)
}
