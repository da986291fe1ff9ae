// Package printers holds the output formats kubectl-mpi's commands share:
// ages and shortened messages as kubectl get shows them, and the NAME
// printer of delete and wait.
package printers

import (
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Age renders a duration since t as kubectl does ("5m", "2d3h"); "<unknown>"
// for a zero time.
func Age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// Truncate shortens s to n characters with an ellipsis.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
