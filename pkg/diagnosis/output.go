package diagnosis

import (
	"fmt"
	"regexp"
	"slices"
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

// outputFailure is one kind of failure recognised in output lines.
type outputFailure struct {
	reason string
	// weight says how much a line of this kind tells of the cause.
	weight weight
	// program: the failure is the program's (a GPU, NCCL or PyTorch
	// failure), not its launch's; the troubleshooting guide lists them apart.
	program bool
	// examples are lines launchers, ssh and programs print for it, for the
	// troubleshooting guide (OutputFailureDocs) and the tests.
	examples []string
	match    *regexp.Regexp
	// explain gives the detail and the fix from the match's groups.
	explain func(m []string, c failureContext) (detail, fix string)
}

// weight orders what the lines of an output say of a failure. The cause is
// the earliest line of the lowest weight: a rank that loses a peer reports
// it after the peer's own error, and the launcher sums up last.
type weight int

const (
	// own: a rank's or the launcher's own failure, in specific words.
	own weight = iota
	// ownGeneric: a library's general error ("NCCL error in: ..."), whose
	// specific words may follow it.
	ownGeneric
	// exception: a Python exception no rule knows.
	exception
	// warning: a library's warning, which may be why the program failed
	// or may be of no consequence.
	warning
	// verdict: the launcher's report of a rank it lost, such as a signal.
	verdict
	// echo: what ranks say when another failed or never came: a rendezvous
	// or a collective that timed out, a peer gone.
	echo
	// unknown: a line no rule knows.
	unknown
)

// failureContext is what a fix names of the failed pod's job.
type failureContext struct {
	// job and namespace name the TrainJob.
	job, namespace string
	// logs is the command that shows the failed container's output.
	logs string
	// sshdConfig is the path of the job's sshd configuration in its pods.
	sshdConfig string
	// servingPort is the port every worker's sshd answered the kubelet's
	// probe on while the launcher ran, when they all did.
	servingPort string
	// agent: the job's workers run Torus's launch agent, not sshd.
	agent bool
	// slots is the job's ranks per worker; gpus its GPUs per worker, of
	// the extended resource gpuResource.
	slots       int32
	gpus        int64
	gpuResource string
	// socketIfName is NCCL_SOCKET_IFNAME as the failed container had it;
	// interfaces the secondary networks Multus attached to its pod.
	socketIfName string
	interfaces   []string
	// rank is the rank the failing line is of, when the output says it.
	rank string
}

// who names the rank a line is of.
func (c failureContext) who() string {
	if c.rank == "" {
		return "a rank"
	}
	return "rank " + c.rank
}

// logsHint is where the whole output is.
func (c failureContext) logsHint() string {
	if c.logs == "" {
		return "kubectl mpi logs " + c.job
	}
	return c.logs
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

// launchFailures are what MPI launchers and ssh print when they cannot
// start or keep the job's ranks.
var launchFailures = []outputFailure{
	{
		reason:   ReasonHostNotResolved,
		weight:   own,
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
		weight:   own,
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
		weight:   own,
		examples: []string{`ssh: connect to host pi-node-0-1.pi port 2222: Connection timed out`, `ssh: connect to host pi-node-0-1.pi port 2222: No route to host`},
		match:    regexp.MustCompile(`connect to host ([^ ]+) port ([0-9]+): (Connection timed out|No route to host|Network is unreachable)`),
		explain: func(m []string, c failureContext) (string, string) {
			return fmt.Sprintf("ssh to %s port %s: %s", m[1], m[2], strings.ToLower(m[3])),
				"something between the job's pods drops their traffic: a NetworkPolicy of the namespace (allow the job's pods to reach each other on the sshd port) or the network itself (kubectl mpi doctor)"
		},
	},
	{
		reason:   ReasonHostKeyMismatch,
		weight:   own,
		examples: []string{`Host key verification failed.`, `@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @`},
		match:    regexp.MustCompile(`Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No [A-Z0-9-]+ host key is known for ([^ ]+)`),
		explain: func(m []string, c failureContext) (string, string) {
			return "a worker's " + c.server() + " did not present the job's host key",
				"the workers' " + c.server() + " must serve the job's host key: run " + c.sshd()
		},
	},
	{
		reason:   ReasonSSHAuthFailed,
		weight:   own,
		examples: []string{`mpiuser@pi-node-0-1.pi: Permission denied (publickey).`},
		match:    regexp.MustCompile(`Permission denied \(publickey`),
		explain: func(m []string, c failureContext) (string, string) {
			return "a worker's " + c.server() + " refused the job's key",
				"the workers' " + c.server() + " must take the job's key for the launcher's user: run " + c.sshd() + " as that user"
		},
	},
	{
		reason:   ReasonRankKilled,
		weight:   verdict,
		examples: []string{`prterun noticed that process rank 3 with PID 41 on node pi-node-0-1 exited on signal 9 (Killed).`, `=   KILLED BY SIGNAL: 9 (Killed)`},
		// Open MPI 4 (mpirun) and 5 (prterun); Hydra (MPICH, Intel MPI).
		match: regexp.MustCompile(`process rank ([0-9]+) with PID [0-9]+ on node ([^ ]+) exited on signal ([0-9]+)|KILLED BY SIGNAL: ([0-9]+)|EXIT STRING: [A-Za-z ]+\(signal ([0-9]+)\)`),
		explain: func(m []string, c failureContext) (string, string) {
			sig := m[3] + m[4] + m[5]
			who := c.who()
			if m[1] != "" {
				who = fmt.Sprintf("rank %s on %s", m[1], m[2])
			}
			detail := fmt.Sprintf("%s was killed by signal %s", who, sig)
			if sig == "9" {
				return detail + " (SIGKILL)", "signal 9 is what the kernel's OOM killer and an evicting node send: see the workers' findings and raise --memory if a rank ran out of it"
			}
			return detail, "see the ranks' output (" + c.logsHint() + ")"
		},
	},
}

// OutputDoc is one failure read from output as the troubleshooting guide
// lists it: what Torus says of it, computed from its first example, in a
// job's words.
type OutputDoc struct {
	Reason   string
	Examples []string
	Detail   string
	Fix      string
	// Program: the program's failure, not its launch's.
	Program bool
}

// OutputFailureDocs describes every failure Torus recognises in output,
// each read from its own examples as a failed container's output would be,
// for a job of that name and namespace whose pods' sshd configuration is at
// sshdConfig, with 4 ranks and 2 GPUs per worker; a failure read otherwise
// while every worker is Ready has a second entry, and a Python exception
// comes last.
func OutputFailureDocs(job, namespace, sshdConfig string) []OutputDoc {
	c := failureContext{job: job, namespace: namespace, sshdConfig: sshdConfig, logs: "kubectl mpi logs " + job + " --launcher",
		slots: 4, gpus: 2, gpuResource: "nvidia.com/gpu"}
	all := slices.Concat(launchFailures, programFailures)
	out := make([]OutputDoc, 0, len(all))
	serving := c
	serving.servingPort = "2222"
	for _, f := range all {
		o := readOutput(f.examples[0], c)
		out = append(out, OutputDoc{Reason: o.reason, Examples: f.examples, Detail: o.detail, Fix: o.fix, Program: f.program})
		// Some failures mean another thing when every worker is Ready.
		if s := readOutput(f.examples[0], serving); s.detail != o.detail {
			out = append(out, OutputDoc{Reason: s.reason, Examples: f.examples[:1], Detail: s.detail, Fix: s.fix, Program: f.program})
		}
	}
	const raised = "ValueError: learning rate must be positive"
	e := readOutput("[rank2]: Traceback (most recent call last):\n[rank2]:   File \"train.py\", line 40, in <module>\n[rank2]: "+raised, c)
	return append(out, OutputDoc{Reason: e.reason, Examples: []string{raised + " (ending a traceback)"}, Detail: e.detail, Fix: e.fix, Program: true})
}

// output is what a failed container's last lines say.
type output struct {
	// quote is the last meaningful lines, or those that name the failure,
	// escaped and bounded.
	quote []string
	// reason, detail and fix are set when a failure was recognised.
	reason, detail, fix string
}

// outLine is one meaningful line of output.
type outLine struct {
	// text is the line without the prefix that names its rank; rank is
	// that rank, or "".
	text, rank string
	// raw is the line as printed, for the quote.
	raw string
}

// rankPrefix is how launchers and PyTorch mark a rank's lines: PyTorch's
// "[rank1]:", Open MPI's --tag-output "[1,1]<stderr>:".
var rankPrefix = regexp.MustCompile(`^\[(?:rank([0-9]+)|[0-9]+,([0-9]+))\](?:<std(?:out|err)>)?:\s?`)

// verdictRank is how launchers name the rank they lost, for a cause whose
// own lines do not: Open MPI's "process rank 1" and "Process name:
// [[29422,1],1]", Hydra's "RANK 1 PID", MPI_Abort's "on rank 1".
var verdictRank = regexp.MustCompile(`process rank ([0-9]+) with PID|Process name: \[\[?[^\],]+,([0-9]+)\]|RANK ([0-9]+) PID [0-9]+ RUNNING AT|MPI_ABORT was invoked on rank ([0-9]+)`)

// A Python exception: the line that ends a traceback.
var (
	traceback     = regexp.MustCompile(`^Traceback \(most recent call last\):`)
	tracebackFile = regexp.MustCompile(`^File "[^"]*", line [0-9]+`)
	exceptionLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt))(?:: (.*))?$`)
)

// ncclErrorType is the line before NCCL's "Last error:", naming its kind.
var ncclErrorType = regexp.MustCompile(`nccl[A-Z][A-Za-z]*:`)

// readOutput reads the end of a failed container's output, as the kubelet
// keeps it in the termination message. Key material is never quoted.
func readOutput(msg string, c failureContext) output {
	out, _ := readOutputWeighed(msg, c)
	return out
}

// readOutputWeighed is readOutput, with the weight of the line it read the
// failure from (unknown when none).
func readOutputWeighed(msg string, c failureContext) (output, weight) {
	lines := meaningfulLines(msg)
	var (
		best    = unknown
		at      int
		rule    *outputFailure
		groups  []string
		inTrace = map[string]bool{}
	)
	for i, l := range lines {
		w, f, m := classify(l)
		if f == nil {
			switch {
			case traceback.MatchString(l.text):
				inTrace[l.rank] = true
				continue
			case !inTrace[l.rank]:
				continue
			}
			if m = exceptionLine.FindStringSubmatch(l.text); m == nil {
				continue
			}
			w = exception
		}
		inTrace[l.rank] = false
		if w < best {
			best, at, rule, groups = w, i, f, m
		}
	}
	if best == unknown {
		var out output
		for _, l := range lines[max(0, len(lines)-quoteLines):] {
			out.quote = append(out.quote, quote(l.raw))
		}
		return out, unknown
	}
	c.rank = lines[at].rank
	if c.rank == "" && rule != nil {
		c.rank = namedRank(rule.match, groups)
	}
	if c.rank == "" {
		// The launcher names the rank it lost when the cause's own
		// lines do not.
		for _, l := range lines {
			if m := verdictRank.FindStringSubmatch(l.text); m != nil {
				c.rank = strings.Join(m[1:], "")
				break
			}
		}
	}
	if rule == nil {
		return pythonException(groups, lines[at], c, lastFrame(lines[:at], lines[at].rank)), best
	}
	out := output{reason: rule.reason, quote: []string{quote(lines[at].raw)}}
	out.detail, out.fix = rule.explain(groups, c)
	return out, best
}

// classify finds the first failure a line matches, and its weight.
func classify(l outLine) (weight, *outputFailure, []string) {
	for _, list := range [][]outputFailure{launchFailures, programFailures} {
		for i := range list {
			if m := list[i].match.FindStringSubmatch(l.text); m != nil {
				return list[i].weight, &list[i], m
			}
		}
	}
	return unknown, nil, nil
}

// namedRank is the match's group named "rank", where the line itself says
// which rank it is of.
func namedRank(re *regexp.Regexp, m []string) string {
	if i := re.SubexpIndex("rank"); i > 0 && i < len(m) {
		return m[i]
	}
	return ""
}

// meaningfulLines splits output into its meaningful lines, without key
// material, each with the rank its prefix names; NCCL's "Last error:" is
// joined to the line after it, and to the error kind before it.
func meaningfulLines(msg string) []outLine {
	var lines []outLine
	inKey := false
	raw := strings.Split(msg, "\n")
	for i := 0; i < len(raw); i++ {
		l := strings.TrimSpace(raw[i])
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
		ol := outLine{text: l, raw: l}
		if m := rankPrefix.FindStringSubmatch(l); m != nil {
			ol.rank = m[1] + m[2]
			ol.text = strings.TrimSpace(l[len(m[0]):])
		}
		if ol.text == "Last error:" && i+1 < len(raw) {
			next := strings.TrimSpace(raw[i+1])
			if m := rankPrefix.FindStringSubmatch(next); m != nil {
				next = strings.TrimSpace(next[len(m[0]):])
			}
			ol.text = "Last error: " + next
			ol.raw += " " + next
			if n := len(lines); n > 0 && lines[n-1].rank == ol.rank && ncclErrorType.MatchString(lines[n-1].text) {
				ol.text = lines[n-1].text + " " + ol.text
			}
			i++
		}
		lines = append(lines, ol)
	}
	return lines
}

// lastFrame is the traceback's innermost frame of a rank: where the
// exception was raised.
func lastFrame(before []outLine, rank string) string {
	for i := len(before) - 1; i >= 0; i-- {
		if l := before[i]; l.rank == rank && tracebackFile.MatchString(l.text) {
			return l.raw
		}
		if l := before[i]; l.rank == rank && traceback.MatchString(l.text) {
			break
		}
	}
	return ""
}

// pythonException explains an exception no rule knows: the program's own.
func pythonException(m []string, l outLine, c failureContext, frame string) output {
	what := m[1]
	if m[2] != "" {
		what += ": " + m[2]
	}
	out := output{reason: ReasonPythonException}
	out.detail = c.who() + " raised " + bounded(what)
	out.fix = "the program's own error: its traceback is in " + c.logsHint()
	if frame != "" {
		out.quote = append(out.quote, quote(frame))
	}
	out.quote = append(out.quote, quote(l.raw))
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
