package diagnosis

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// Reasons for failures read from a container's own last output: what MPI
// launchers and ssh print when they cannot start or keep the job's ranks.
const (
	// ReasonHostNotResolved: a host name of the job did not resolve.
	ReasonHostNotResolved = "HostNotResolved"
	// ReasonSSHConnectionRefused: nothing listened on a worker's sshd port.
	ReasonSSHConnectionRefused = "SSHConnectionRefused"
	// ReasonHostUnreachable: a worker's address did not answer at all.
	ReasonHostUnreachable = "HostUnreachable"
	// ReasonHostKeyMismatch: a worker's sshd did not prove the job's host key.
	ReasonHostKeyMismatch = "HostKeyMismatch"
	// ReasonSSHAuthFailed: a worker's sshd refused the job's client key.
	ReasonSSHAuthFailed = "SSHAuthFailed"
	// ReasonRankKilled: the launcher reports a rank killed by a signal.
	ReasonRankKilled = "RankKilled"
)

// Bounds of what a finding quotes of a container's output: the kubelet
// keeps at most 80 lines or 2 KiB of it; a status message quotes less.
const (
	quoteLines    = 3
	quoteLineSize = 240
)

// launchFailure is one kind of failure recognised in output lines.
type launchFailure struct {
	reason string
	// examples are lines launchers and ssh print for it, for the
	// troubleshooting guide (LaunchFailureDocs) and the tests.
	examples []string
	match    *regexp.Regexp
	// explain gives the detail and the fix from the match's groups.
	explain func(m []string, c failureContext) (detail, fix string)
}

// failureContext is what a fix names of the failed pod's job.
type failureContext struct {
	// job and namespace name the TrainJob.
	job, namespace string
	// sshdConfig is the path of the job's sshd configuration in its pods.
	sshdConfig string
	// servingPort is the port every worker's sshd answered the kubelet's
	// probe on while the launcher ran, when they all did.
	servingPort string
	// agent: the job's workers run Torus's launch agent, not sshd.
	agent bool
}

// sshd is the command line a worker's sshd needs to serve the job.
func (c failureContext) sshd() string {
	if c.agent {
		return "Torus's launch agent (" + mpi.LaunchBinDir + "/" + mpi.LaunchBinary + " agent, the workers' command Torus sets)"
	}
	return "sshd -De -f " + c.sshdConfig
}

// server names what serves the launcher's connections on the workers.
func (c failureContext) server() string {
	if c.agent {
		return "launch agent"
	}
	return "sshd"
}

// launchFailures are tried on each line of output, earliest line first:
// the first failure a launcher prints is the cause of those after it.
var launchFailures = []launchFailure{
	{
		reason:   ReasonHostNotResolved,
		examples: []string{`ssh: Could not resolve hostname pi-node-0-1.pi: Name or service not known`, `[proxy:0@pi-launcher-0-0] HYDU_sock_connect: unable to get host address for pi-node-0-1.pi (1)`},
		// ssh; Hydra's proxies (MPICH, Intel MPI); glibc's words.
		match: regexp.MustCompile(`(?i)(?:could not resolve hostname|unable to get host address for|could not resolve host) +([^ :]+)|(name or service not known|temporary failure in name resolution|no address associated with hostname)`),
		explain: func(m []string, c failureContext) (string, string) {
			what := "a host name of the job did not resolve"
			if m[1] != "" {
				what = m[1] + " did not resolve"
			}
			return what, "the job's pods find each other through the cluster's DNS and the job's headless Service: check that CoreDNS runs and that the Service's EndpointSlices list the pods (kubectl get endpointslices -n " +
				c.namespace + " -l kubernetes.io/service-name=" + c.job + ")"
		},
	},
	{
		reason:   ReasonSSHConnectionRefused,
		examples: []string{`ssh: connect to host pi-node-0-1.pi port 2222: Connection refused`, `torus-ssh: connect to host pi-node-0-1.pi port 2222: Connection refused`},
		match:    regexp.MustCompile(`connect to host ([^ ]+) port ([0-9]+): Connection refused`),
		explain: func(m []string, c failureContext) (string, string) {
			if c.servingPort == m[2] {
				// sshd answers the kubelet's probe from the node, but not
				// the launcher: a policy agent rejects pod-to-pod traffic.
				return fmt.Sprintf("ssh to %s port %s was refused while every worker's %s answered the kubelet's probe there: a NetworkPolicy rejects the launcher's connection", m[1], m[2], c.server()),
					"let the job's pods reach each other: annotate the namespace or the runtime " + api.AnnotationNetworkPolicy + "=" + api.NetworkPolicyRestricted +
						" for a policy admitting the job's own pods, or allow them in the namespace's policies (kubectl get networkpolicy -n " + c.namespace + ")"
			}
			return fmt.Sprintf("ssh to %s port %s was refused: no %s listens there", m[1], m[2], c.server()),
				"the workers must run " + c.sshd() + " and keep it up while the job runs: see their logs (kubectl mpi logs " + c.job + ")"
		},
	},
	{
		reason:   ReasonHostUnreachable,
		examples: []string{`ssh: connect to host pi-node-0-1.pi port 2222: Connection timed out`, `ssh: connect to host pi-node-0-1.pi port 2222: No route to host`},
		match:    regexp.MustCompile(`connect to host ([^ ]+) port ([0-9]+): (Connection timed out|No route to host|Network is unreachable)`),
		explain: func(m []string, c failureContext) (string, string) {
			return fmt.Sprintf("ssh to %s port %s: %s", m[1], m[2], strings.ToLower(m[3])),
				"something between the job's pods drops their traffic: a NetworkPolicy of the namespace (allow the job's pods to reach each other on the sshd port) or the network itself (kubectl mpi doctor)"
		},
	},
	{
		reason:   ReasonHostKeyMismatch,
		examples: []string{`Host key verification failed.`, `@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @`},
		match:    regexp.MustCompile(`Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No [A-Z0-9-]+ host key is known for ([^ ]+)`),
		explain: func(m []string, c failureContext) (string, string) {
			return "a worker's " + c.server() + " did not present the job's host key",
				"the workers' " + c.server() + " must serve the job's host key: run " + c.sshd()
		},
	},
	{
		reason:   ReasonSSHAuthFailed,
		examples: []string{`mpiuser@pi-node-0-1.pi: Permission denied (publickey).`},
		match:    regexp.MustCompile(`Permission denied \(publickey`),
		explain: func(m []string, c failureContext) (string, string) {
			return "a worker's " + c.server() + " refused the job's key",
				"the workers' " + c.server() + " must take the job's key for the launcher's user: run " + c.sshd() + " as that user"
		},
	},
	{
		reason:   ReasonRankKilled,
		examples: []string{`prterun noticed that process rank 3 with PID 41 on node pi-node-0-1 exited on signal 9 (Killed).`, `=   KILLED BY SIGNAL: 9 (Killed)`},
		// Open MPI 4 (mpirun) and 5 (prterun); Hydra (MPICH, Intel MPI).
		match: regexp.MustCompile(`process rank ([0-9]+) with PID [0-9]+ on node ([^ ]+) exited on signal ([0-9]+)|KILLED BY SIGNAL: ([0-9]+)|EXIT STRING: [A-Za-z ]+\(signal ([0-9]+)\)`),
		explain: func(m []string, c failureContext) (string, string) {
			sig := m[3] + m[4] + m[5]
			who := "a rank"
			if m[1] != "" {
				who = fmt.Sprintf("rank %s on %s", m[1], m[2])
			}
			detail := fmt.Sprintf("%s was killed by signal %s", who, sig)
			if sig == "9" {
				return detail + " (SIGKILL)", "signal 9 is what the kernel's OOM killer and an evicting node send: see the workers' findings and raise --memory if a rank ran out of it"
			}
			return detail, "see the ranks' logs (kubectl mpi logs " + c.job + ")"
		},
	},
}

// LaunchDoc is one launch failure as the troubleshooting guide lists it:
// what Torus says of it, computed from its first example, in a job's words.
type LaunchDoc struct {
	Reason   string
	Examples []string
	Detail   string
	Fix      string
}

// LaunchFailureDocs describes every launch failure Torus recognises, each
// read from its own examples as a failed container's output would be, for
// a job of that name and namespace whose pods' sshd configuration is at
// sshdConfig; a failure read otherwise while every worker is Ready has a
// second entry.
func LaunchFailureDocs(job, namespace, sshdConfig string) []LaunchDoc {
	c := failureContext{job: job, namespace: namespace, sshdConfig: sshdConfig}
	out := make([]LaunchDoc, 0, len(launchFailures))
	serving := c
	serving.servingPort = "2222"
	for _, f := range launchFailures {
		o := readOutput(f.examples[0], c)
		out = append(out, LaunchDoc{Reason: o.reason, Examples: f.examples, Detail: o.detail, Fix: o.fix})
		// Some failures mean another thing when every worker is Ready.
		if s := readOutput(f.examples[0], serving); s.detail != o.detail {
			out = append(out, LaunchDoc{Reason: s.reason, Examples: f.examples[:1], Detail: s.detail, Fix: s.fix})
		}
	}
	return out
}

// output is what a failed container's last lines say.
type output struct {
	// quote is the last meaningful lines, or the one that names the
	// failure, escaped and bounded.
	quote []string
	// reason, detail and fix are set when a launch failure was recognised.
	reason, detail, fix string
}

// readOutput reads the end of a failed container's output, as the kubelet
// keeps it in the termination message. Key material is never quoted.
func readOutput(msg string, c failureContext) output {
	var lines []string
	inKey := false
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "-----BEGIN"):
			inKey = !strings.Contains(l, "PUBLIC KEY")
			continue
		case strings.HasPrefix(l, "-----END"):
			inKey = false
			continue
		case inKey || !meaningful(l):
			continue
		}
		lines = append(lines, l)
	}
	var out output
	for _, l := range lines {
		for _, f := range launchFailures {
			if m := f.match.FindStringSubmatch(l); m != nil {
				out.reason = f.reason
				out.detail, out.fix = f.explain(m, c)
				out.quote = []string{quote(l)}
				return out
			}
		}
	}
	for _, l := range lines[max(0, len(lines)-quoteLines):] {
		out.quote = append(out.quote, quote(l))
	}
	return out
}

// meaningful reports whether a line says something: not blank, not a
// banner's rule of dashes or equals signs, not a run of base64 (a key's
// body, or a blob nobody reads).
func meaningful(l string) bool {
	letters := 0
	for _, r := range l {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	if letters == 0 {
		return false
	}
	return !(len(l) >= 40 && base64Line.MatchString(l))
}

var base64Line = regexp.MustCompile(`^[A-Za-z0-9+/]+=*$`)

// quote escapes control characters (a terminal's escape sequences must not
// reach the reader's terminal through describe) and bounds the line.
func quote(l string) string {
	var b strings.Builder
	for _, r := range l {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	s := b.String()
	if len(s) > quoteLineSize {
		cut := quoteLineSize
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
