package diagnosis

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// PodDoc is one pod state as the troubleshooting guide lists it: what the
// pod shows, and what Torus says of it.
type PodDoc struct {
	Shows    string
	Reason   string
	Detail   string
	Fix      string
	Terminal bool
}

// podExample is a pod state Torus explains, for the troubleshooting guide.
type podExample struct {
	shows string
	edit  func(p *corev1.Pod)
}

// podExamples are one pod of each state the pod diagnosis explains.
var podExamples = []podExample{
	{"`PodScheduled=False`, reason `Unschedulable`", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}}
	}},
	{"waiting, `ErrImagePull` or `ImagePullBackOff`", exampleWaiting("ImagePullBackOff", `Back-off pulling image "registry.example.com/team/train:1"`)},
	{"waiting, `InvalidImageName`", exampleWaiting("InvalidImageName", `Failed to apply default image tag "Train:1": couldn't parse image name`)},
	{"waiting, `ErrImageNeverPull`", exampleWaiting("ErrImageNeverPull", `Container image "train:1" is not present with pull policy of Never`)},
	{"waiting, `CreateContainerConfigError`", exampleWaiting("CreateContainerConfigError", `secret "registry-creds" not found`)},
	{"waiting, `CrashLoopBackOff`", func(p *corev1.Pod) {
		exampleWaiting("CrashLoopBackOff", "back-off 40s restarting failed container")(p)
		p.Status.ContainerStatuses[0].RestartCount = 4
	}},
	{"terminated, `OOMKilled`", exampleTerminated("OOMKilled", 137, "")},
	{"terminated, exit code not 0", exampleTerminated("Error", 1, "epoch 3: loss is nan, stopping")},
	{"terminated, `StartError` (the SSH setup)", func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: mpi.SSHInitContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "StartError", ExitCode: 128,
			Message: `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "sh": executable file not found in $PATH`}}}}
		p.Status.Phase = corev1.PodFailed
	}},
	{"`Failed`, reason `Evicted`", func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	}},
	{"`DisruptionTarget=True`, reason `EvictionByEvictionAPI` (`PreemptionByScheduler`, `DeletionByTaintManager`, `DeletionByPodGC`, `TerminationByKubelet` alike)", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
	}},
	{"terminated, exit code 75, in a job run by the launch agent", func(p *corev1.Pod) {
		exampleTerminated("Error", mpi.ExitWorldLost, "")(p)
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: mpi.LaunchVolume, MountPath: mpi.LaunchBinDir}}
	}},
}

func exampleWaiting(reason, message string) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mpi.TrainerContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	}
}

func exampleTerminated(reason string, code int32, message string) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mpi.TrainerContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Message: message}}}}
	}
}

// PodFailureDocs says what Torus says of each pod state it explains, read
// by Pods from an example pod of it: worker 1 of job NAME, holding ranks
// 4-7, with a memory limit of 16Gi.
func PodFailureDocs() []PodDoc {
	placement := mpi.NewPlacement("NAME", 2, 4, false)
	out := make([]PodDoc, 0, len(podExamples))
	for _, e := range podExamples {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "NAME-node-0-1-x7k2p", Namespace: "NS", Labels: map[string]string{
				api.LabelJobName: "NAME", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "1"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: mpi.TrainerContainer, Image: "registry.example.com/team/train:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}},
			}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		e.edit(&p)
		fs := Pods([]corev1.Pod{p}, placement)
		if len(fs) == 0 {
			continue
		}
		f := fs[0]
		out = append(out, PodDoc{Shows: e.shows, Reason: f.Reason, Detail: f.Detail, Fix: f.Fix, Terminal: f.Terminal})
	}
	// A pod without its sandbox, which only the kubelet's events explain:
	// an attachment of the job's network profile that fails.
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "NAME-node-0-1-x7k2p", Namespace: "NS", UID: "pod-uid", Labels: map[string]string{
			api.LabelJobName: "NAME", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "1"}},
		Spec: corev1.PodSpec{NodeName: "node-a"},
	}
	event := corev1.Event{Reason: ReasonFailedCreatePodSandBox, InvolvedObject: corev1.ObjectReference{UID: p.UID},
		Message: `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "4f1c": plugin type="multus" name="multus" failed (add): [NS/NAME-node-0-1-x7k2p:roce-net]: error adding container to network "roce-net": failed to lookup master "ens8f0": Link not found`}
	if f, ok := Sandbox(&p, placement, []corev1.Event{event}, true); ok {
		out = append(out, PodDoc{Shows: "`PodReadyToStartContainers=False`, the kubelet's event `FailedCreatePodSandBox`", Reason: f.Reason, Detail: f.Detail, Fix: f.Fix, Terminal: f.Terminal})
	}
	return out
}
