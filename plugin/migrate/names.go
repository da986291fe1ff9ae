package migrate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/torus-mpi/torus/operator/mpi"
)

// rfc1035 is the format the TrainJob CRD demands of metadata.name.
var rfc1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

const dnsLabelMax = 63

// nameProblems says why name cannot name a TrainJob of an MPI job with
// that many workers, or returns nothing.
func nameProblems(name string, workers int32) []string {
	if name == "" {
		return []string{"is empty: a TrainJob and its runtime need a name (generateName is not converted)"}
	}
	var out []string
	if len(name) > dnsLabelMax {
		out = append(out, fmt.Sprintf("is %d characters; a TrainJob name is an RFC 1035 label of at most %d", len(name), dnsLabelMax))
	}
	if strings.Contains(name, ".") {
		out = append(out, `contains ".": a TrainJob name is an RFC 1035 label, which has no dots`)
	}
	if !rfc1035.MatchString(strings.ReplaceAll(name, ".", "-")) {
		out = append(out, "is not an RFC 1035 label: use lowercase letters, digits and '-', start with a letter and end with a letter or digit")
	}
	if len(out) > 0 {
		return out
	}
	if limit := mpi.MaxTrainJobNameLength(workers); len(name) > limit {
		out = append(out, fmt.Sprintf("is %d characters; an MPI job needs at most %d so that pod names such as %q fit in %d characters",
			len(name), limit, mpi.PodHostname(name, mpi.LauncherJob, 0)+"-abcde", dnsLabelMax))
	}
	return out
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
