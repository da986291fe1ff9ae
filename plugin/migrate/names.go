package migrate

import (
	"strings"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// nameProblems says why name cannot name a TrainJob of an MPI job with
// that many workers, or returns nothing.
func nameProblems(name string, workers int32) []string {
	if name == "" {
		return []string{"is empty: a TrainJob and its runtime need a name (generateName is not converted)"}
	}
	return mpi.TrainJobNameProblems(name, workers)
}

// suggestName proposes a valid name close to name.
func suggestName(name string, workers int32) string {
	limit := mpi.MaxTrainJobNameLength(workers)
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := b.String()
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "job-" + s
	}
	if len(s) > limit {
		s = s[:limit]
	}
	return strings.TrimRight(s, "-")
}
