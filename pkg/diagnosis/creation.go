package diagnosis

import (
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// ReasonFailedCreate is the Job controller's event reason when the API
// server refuses a pod it creates: a ResourceQuota, a LimitRange, Pod
// Security admission, an SCC, another webhook.
const ReasonFailedCreate = "FailedCreate"

// childJob reads a JobSet child Job's name: <jobset>-<replicated job>-<index>.
var childJob = regexp.MustCompile(`^(.+)-(` + mpi.LauncherJob + `|` + mpi.NodeJob + `)-\d+$`)

// TrainJobOfJob names the TrainJob (its JobSet) whose child Job has that
// name, or "".
func TrainJobOfJob(job string) string {
	if m := childJob.FindStringSubmatch(job); m != nil {
		return m[1]
	}
	return ""
}

// creationFixes says what to change for each kind of refusal, by the words
// of the component that refused: first match wins.
var creationFixes = []struct {
	match, reason, fix string
}{
	{"exceeded quota", "QuotaExceeded", "the namespace's ResourceQuota is used up: wait for other jobs, ask for fewer resources (--workers, --cpu, --memory, --gpus), or ask your admin for more quota (kubectl describe resourcequota)"},
	{"must specify", "QuotaExceeded", "the namespace's ResourceQuota requires requests and limits for what it counts: set --cpu and --memory"},
	{"LimitRange", "LimitRangeRefused", "fit --cpu and --memory within the namespace's LimitRange (kubectl describe limitrange)"},
	{"maximum ", "LimitRangeRefused", "fit --cpu and --memory within the namespace's LimitRange (kubectl describe limitrange)"},
	{"minimum ", "LimitRangeRefused", "fit --cpu and --memory within the namespace's LimitRange (kubectl describe limitrange)"},
	{"violates PodSecurity", "PodSecurityRefused", "the namespace's Pod Security level refuses the pods: see what it names; a network profile's capabilities need the privileged level"},
	{"unable to validate against any security context constraint", "SCCRefused", "no SCC the job's ServiceAccount may use admits the pods: see docs/admins/openshift.md"},
}

// PodCreation reads the Job controller's FailedCreate events about a
// TrainJob's child Jobs since a time (the job's last start) and says, per
// replicated job, why its pods cannot be created. Pods that exist speak for
// themselves (Pods); these are the pods that never did.
func PodCreation(events []corev1.Event, trainJob string, since time.Time) []Finding {
	latest := map[string]*corev1.Event{}
	for i := range events {
		e := &events[i]
		if e.Reason != ReasonFailedCreate || e.InvolvedObject.Kind != "Job" || TrainJobOfJob(e.InvolvedObject.Name) != trainJob {
			continue
		}
		at := eventTime(e)
		if at.Before(since) {
			continue
		}
		if old, ok := latest[e.InvolvedObject.Name]; !ok || eventTime(old).Before(at) {
			latest[e.InvolvedObject.Name] = e
		}
	}
	var out []Finding
	for job, e := range latest {
		host := "workers"
		if childJob.FindStringSubmatch(job)[2] == mpi.LauncherJob {
			host = api.RoleLauncher
		}
		f := Finding{Host: host, Reason: ReasonFailedCreate, Terminal: false, at: eventTime(e),
			Detail: "the Job controller cannot create the pods of Job " + job + ": " + e.Message,
			Fix:    "see the events of Job " + job}
		for _, c := range creationFixes {
			if strings.Contains(e.Message, c.match) {
				f.Reason, f.Fix = c.reason, c.fix
				break
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// eventTime is when an event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
