package diagnosis

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestSandbox(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := worker("1", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}}})
	pod.UID, pod.Namespace, pod.Spec.NodeName, pod.CreationTimestamp = "uid-1", "team", "node-a", metav1.NewTime(t0)
	event := func(uid, reason, msg string, at time.Time) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(at), InvolvedObject: corev1.ObjectReference{UID: k8stypes.UID(uid)}}
	}
	const cni = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "abc": plugin type="multus" name="multus" failed (add): [team/pi-node-0-1-abcde:no-master]: error adding container to network "no-master": failed to lookup master "eth9": Link not found`
	cases := map[string]struct {
		events    []corev1.Event
		attaching bool
		want      string
	}{
		"no event: nothing to say": {},
		"another pod's event":      {events: []corev1.Event{event("uid-2", ReasonFailedCreatePodSandBox, cni, t0)}},
		"the plugin's own words, and the profile's networks as the suspect": {
			events: []corev1.Event{
				event("uid-1", ReasonFailedCreatePodSandBox, "an older failure", t0),
				event("uid-1", ReasonFailedCreatePodSandBox, cni, t0.Add(time.Second)),
			},
			attaching: true,
			want: `worker-1 (ranks 4-7) FailedCreatePodSandBox: the kubelet cannot set up the pod's sandbox on node node-a: plugin type="multus" name="multus" failed (add): [team/pi-node-0-1-abcde:no-master]: error adding container to network "no-master": failed to lookup master "eth9": Link not found; ` +
				`an attachment of the job's MPINetworkProfile failed: check the NetworkAttachmentDefinitions it names (their CNI configuration, master interface and IPAM) against the nodes, and Multus's log on node node-a [pod pi-node-0-1-abcde]`,
		},
		"without a profile, the node's network setup": {
			events: []corev1.Event{event("uid-1", ReasonFailedCreatePodSandBox, "failed to setup network", t0)},
			want:   "worker-1 (ranks 4-7) FailedCreatePodSandBox: the kubelet cannot set up the pod's sandbox on node node-a: failed to setup network; the node's network setup (its CNI plugin) failed for this pod: see kubectl describe pod pi-node-0-1-abcde -n team [pod pi-node-0-1-abcde]",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, ok := Sandbox(&pod, mpi.NewPlacement("pi", 4, 4, false), tc.events, tc.attaching)
			if got := map[bool]string{true: f.Message(), false: ""}[ok]; got != tc.want {
				t.Errorf("Sandbox() =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	if AwaitsSandbox(&pod, t0.Add(time.Second)) {
		t.Error("a pod one second old awaits its sandbox: creating one takes a moment")
	}
	if !AwaitsSandbox(&pod, t0.Add(time.Minute)) {
		t.Error("a pod without its sandbox for a minute does not count as waiting for it")
	}
}
