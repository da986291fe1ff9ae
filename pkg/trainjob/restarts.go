package trainjob

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
)

// ConditionRestarted is True once the job has restarted its MPI world. Its
// message counts the restarts, those counted against the budget, the
// budget and Kueue's evictions on its first line, then says why each of
// the latest runs stopped, one a line (Restarts): the job's record of its
// restarts, on the job itself, as long as it lives.
const ConditionRestarted = "Restarted"

// Reasons of ConditionRestarted, for the latest restart.
const (
	// ReasonWorldLost: the world lost a pod to something other than the
	// program (evicted, preempted, deleted, its node lost); the restart
	// did not count against the budget.
	ReasonWorldLost = "WorldLost"
	// ReasonProgramFailed: the program failed; the restart counted.
	ReasonProgramFailed = "ProgramFailed"
	// ReasonRestarting is the Running condition's while the job's new
	// world starts after a restart.
	ReasonRestarting = "Restarting"
)

// MaxRestartsKept is how many runs' ends ConditionRestarted keeps, the
// latest: a job restarts at most mpi.MaxRestarts times counted, and any
// number of times not counted.
const MaxRestartsKept = 10

// A run that follows restarts not the program's starts at once the first
// time, then backs off as the kubelet does for a crashing container: a node
// that keeps losing the job's pods, or a policy that keeps evicting them,
// would otherwise restart the world in a tight loop, each time making new
// pods and keys.
const (
	RestartBackoffBase = 10 * time.Second
	RestartBackoffMax  = 5 * time.Minute
	// restartBackoffReset: a run that lasted this long ends a streak.
	restartBackoffReset = 10 * time.Minute
)

// maxCause bounds one run's cause in ConditionRestarted.
const maxCause = 600

// Restart is the end of one run of a job, which restarted it.
type Restart struct {
	// Run is the run that stopped: 0 for the first.
	Run int32 `json:"run"`
	// At is when Torus saw the restart.
	At time.Time `json:"at"`
	// Counted says whether the restart spent the budget; nil when unknown.
	Counted *bool `json:"counted,omitempty"`
	// Evicted says Kueue stopped the run (preempted it for a job of
	// higher priority, or evicted it otherwise): its world starts again
	// once Kueue admits the job again, as the same run of the JobSet, and
	// the budget is not spent.
	Evicted bool `json:"evicted,omitempty"`
	// Cause says what stopped the run: the host, what stopped it, and the
	// program's last words where it failed.
	Cause string `json:"cause"`
}

// Restarts is a job's record of its restarts.
type Restarts struct {
	// Total is how many times the job restarted, and Counted how many of
	// those spent its budget of Budget.
	Total   int32 `json:"total"`
	Counted int32 `json:"counted"`
	Budget  int32 `json:"budget"`
	// Evictions is how many times Kueue evicted the running job, beside
	// Total.
	Evictions int32 `json:"evictions,omitempty"`
	// Latest are the latest runs' ends, oldest first.
	Latest []Restart `json:"latest,omitempty"`
}

// String is the restart's line in ConditionRestarted's message.
func (r Restart) String() string {
	counted := ""
	if r.Evicted {
		counted = " (" + evictedMark + ")"
	} else if r.Counted != nil {
		counted = " (not counted)"
		if *r.Counted {
			counted = " (counted)"
		}
	}
	cause := r.Cause
	if len(cause) > maxCause {
		cause = cause[:maxCause] + "…"
	}
	return fmt.Sprintf("run %d stopped %s%s: %s", r.Run, r.At.UTC().Format(time.RFC3339), counted, strings.ReplaceAll(cause, "\n", " "))
}

// Summary counts the restarts: "2 restarts, 1 counted against the budget
// of 3", then ", evicted by Kueue 1 time" where Kueue evicted the job.
func (r Restarts) Summary() string {
	s := fmt.Sprintf("%d %s, %d counted against the budget of %d", r.Total, plural(r.Total, "restart", "restarts"), r.Counted, r.Budget)
	if r.Evictions > 0 {
		s += fmt.Sprintf(", %s %d %s", evictedMark, r.Evictions, plural(r.Evictions, "time", "times"))
	}
	return s
}

// Stops is how many times the job's world stopped and started again: its
// restarts and Kueue's evictions.
func (r Restarts) Stops() int32 { return r.Total + r.Evictions }

// Evict records that Kueue evicted the job during run, for cause, at.
func (r *Restarts) Evict(run int32, at time.Time, cause string) {
	r.Evictions++
	r.Add(Restart{Run: run, At: at, Counted: ptr.To(false), Evicted: true, Cause: cause})
}

// Add keeps the end of a run, and the latest MaxRestartsKept of them.
func (r *Restarts) Add(x Restart) {
	r.Latest = append(r.Latest, x)
	if n := len(r.Latest); n > MaxRestartsKept {
		r.Latest = r.Latest[n-MaxRestartsKept:]
	}
}

// Message renders the record as ConditionRestarted's message.
func (r Restarts) Message() string {
	lines := []string{r.Summary()}
	for _, x := range r.Latest {
		lines = append(lines, x.String())
	}
	return strings.Join(lines, "\n")
}

func plural(n int32, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// evictedMark tells Kueue's evictions in the record.
const evictedMark = "evicted by Kueue"

var (
	summaryLine = regexp.MustCompile(`^(\d+) restarts?, (\d+) counted against the budget of (\d+)(?:, evicted by Kueue (\d+) times?)?$`)
	restartLine = regexp.MustCompile(`^run (\d+) stopped (\S+?)(?: \(((?:not )?counted|evicted by Kueue)\))?: (.*)$`)
)

// RestartsOf reads a job's record of its restarts from ConditionRestarted;
// the zero Restarts when it has none.
func RestartsOf(tj *trainer.TrainJob) Restarts {
	c := meta.FindStatusCondition(tj.Status.Conditions, ConditionRestarted)
	if c == nil {
		return Restarts{}
	}
	var out Restarts
	for i, l := range strings.Split(c.Message, "\n") {
		if i == 0 {
			if m := summaryLine.FindStringSubmatch(l); m != nil {
				out.Total, out.Counted, out.Budget, out.Evictions = atoi32(m[1]), atoi32(m[2]), atoi32(m[3]), atoi32(m[4])
			}
			continue
		}
		m := restartLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		r := Restart{Run: atoi32(m[1]), Cause: m[4]}
		r.At, _ = time.Parse(time.RFC3339, m[2])
		switch m[3] {
		case "":
		case evictedMark:
			r.Evicted, r.Counted = true, ptr.To(false)
		default:
			counted := m[3] == "counted"
			r.Counted = &counted
		}
		out.Latest = append(out.Latest, r)
	}
	return out
}

// Backoff is how long the run after the latest restart waits before its
// pods may start, counted from that restart (its At), and Streak how many
// restarts in a row were not the program's: the latest ones not counted,
// each run between them shorter than restartBackoffReset. Nothing after a
// counted restart or the first of a streak; then RestartBackoffBase,
// doubling with each restart of the streak, up to RestartBackoffMax.
// Kueue's evictions do not count: Kueue paces its own readmissions.
func (r Restarts) Backoff() (wait time.Duration, streak int) {
	restarts := r.restarts()
	for i := len(restarts) - 1; i >= 0; i-- {
		x := restarts[i]
		if x.Counted == nil || *x.Counted {
			break
		}
		streak++
		if i > 0 && x.At.Sub(restarts[i-1].At) >= restartBackoffReset {
			break
		}
	}
	if streak < 2 {
		return 0, streak
	}
	wait = RestartBackoffMax
	if shift := streak - 2; shift < 8 {
		wait = min(RestartBackoffBase<<shift, RestartBackoffMax)
	}
	return wait, streak
}

// LatestRestart is the latest of the JobSet's restarts the record keeps
// (Kueue's evictions aside).
func (r Restarts) LatestRestart() (Restart, bool) {
	restarts := r.restarts()
	if len(restarts) == 0 {
		return Restart{}, false
	}
	return restarts[len(restarts)-1], true
}

// Recorded is how many of the JobSet's restarts the record has seen: a
// restart of run N is the Nth + 1, and an eviction during run N says
// the record had seen N.
func (r Restarts) Recorded() int32 {
	var seen int32
	for _, x := range r.Latest {
		n := x.Run + 1
		if x.Evicted {
			n = x.Run
		}
		seen = max(seen, n)
	}
	return seen
}

// restarts are the kept ends of runs the JobSet restarted.
func (r Restarts) restarts() []Restart {
	var out []Restart
	for _, x := range r.Latest {
		if !x.Evicted {
			out = append(out, x)
		}
	}
	return out
}

func atoi32(s string) int32 {
	n, _ := strconv.ParseInt(s, 10, 32)
	return int32(n)
}
