package diagnosis

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/launch/cmdline"
)

// Quiet is what the end of a running job's launcher output says: when it
// last printed, and the failure its last lines show, if any. A rank that
// raised or whose CUDA or NCCL call failed, while the others wait for it in
// a collective, leaves the world running for ever and printing nothing.
type Quiet struct {
	// LastOutput is when the launcher last printed; zero when it never did.
	LastOutput time.Time
	// Reason, Detail, Fix and Output are the failure the lines show, as a
	// finding gives them; Reason is empty when they show none.
	Reason, Detail, Fix string
	Output              []string
}

// Quote renders the output lines that name the failure, each in quotes.
func (q Quiet) Quote() string { return quoteAll(q.Output) }

// quietFailures are the weights of a failure that leaves the other ranks
// waiting: a rank's own, an exception, and a rank that waited for a peer
// and gave up. A library's warning alone is not one.
func quietFailure(w weight) bool {
	return w == own || w == ownGeneric || w == exception || w == echo
}

// ReadQuiet reads the end of a running job's launcher output, each line
// prefixed with the kubelet's RFC 3339 timestamp (pods/log with
// timestamps=true); its fixes name what the launcher pod's job runs (its
// sshd configuration or the launch agent).
func ReadQuiet(log string, launcher *corev1.Pod) Quiet {
	var q Quiet
	var text strings.Builder
	for _, l := range strings.Split(log, "\n") {
		stamp, rest, ok := strings.Cut(l, " ")
		t, err := time.Parse(time.RFC3339Nano, stamp)
		if !ok || err != nil {
			// The first line of a read cut by its byte limit.
			continue
		}
		q.LastOutput = t
		if strings.HasPrefix(rest, cmdline.Waiting) {
			// The launcher's wait for a worker that is starting: it goes
			// on waiting, so nothing there stops the others.
			continue
		}
		text.WriteString(rest)
		text.WriteByte('\n')
	}
	c := contextOf(launcher)
	c.logs = "kubectl mpi logs " + c.job + " --launcher"
	out, w := readOutputWeighed(text.String(), c)
	if out.reason != "" && quietFailure(w) {
		q.Reason, q.Detail, q.Fix, q.Output = out.reason, out.detail, out.fix, out.quote
	}
	return q
}
