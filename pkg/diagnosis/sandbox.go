package diagnosis

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// ReasonFailedCreatePodSandBox is the kubelet's event reason when it
// cannot set up a pod's sandbox, most often its network: the CNI plugin
// (Multus and the plugins it delegates to) failed.
const ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"

// sandboxGrace is how long a pod may be without its sandbox before the
// kubelet's events about it are read: creating one takes a moment.
const sandboxGrace = 5 * time.Second

// AwaitsSandbox says whether a scheduled pod has been waiting for its
// sandbox (PodReadyToStartContainers False) for longer than a moment at
// now: the kubelet's FailedCreatePodSandBox events then say why.
func AwaitsSandbox(p *corev1.Pod, now time.Time) bool {
	if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodPending || !p.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionFalse {
			return now.Sub(p.CreationTimestamp.Time) > sandboxGrace
		}
	}
	return false
}

// Sandbox explains a pod that has no sandbox from the kubelet's latest
// FailedCreatePodSandBox event about it (nil without one), in the CNI
// plugin's own words. attaching says the job has networks of a profile to
// attach, whose definitions are the first suspect.
func Sandbox(p *corev1.Pod, placement mpi.Placement, events []corev1.Event, attaching bool) (Finding, bool) {
	var latest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Reason != ReasonFailedCreatePodSandBox || e.InvolvedObject.UID != p.UID {
			continue
		}
		if latest == nil || eventTime(latest).Before(eventTime(e)) {
			latest = e
		}
	}
	if latest == nil {
		return Finding{}, false
	}
	host, ranks := HostOf(p, placement)
	f := Finding{Pod: p.Name, Host: host, Ranks: ranks, Reason: ReasonFailedCreatePodSandBox, at: eventTime(latest),
		Detail: "the kubelet cannot set up the pod's sandbox on node " + p.Spec.NodeName + ": " + sandboxCause(latest.Message),
		Fix:    "the node's network setup (its CNI plugin) failed for this pod: see kubectl describe pod " + p.Name + " -n " + p.Namespace}
	if attaching {
		f.Fix = "an attachment of the job's MPINetworkProfile failed: check the NetworkAttachmentDefinitions it names (their CNI configuration, master interface and IPAM) against the nodes, and Multus's log on node " + p.Spec.NodeName
	}
	return f, true
}

// sandboxCause keeps the CNI plugins' words, without the kubelet's and the
// runtime's wrapping ("Failed to create pod sandbox: rpc error: code =
// Unknown desc = failed to setup network for sandbox \"…\": ").
func sandboxCause(msg string) string {
	if _, after, ok := strings.Cut(msg, "plugin type="); ok {
		return "plugin type=" + bounded(after)
	}
	return bounded(msg)
}

// bounded keeps a message to one line of a sensible length.
func bounded(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 400
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
