package controller

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// A user may set Torus's job-name label on any object of theirs; the cache
// must then hold only what Torus reads, however large the object.
func TestCacheTransformsBoundWhatUsersWrite(t *testing.T) {
	big := strings.Repeat("x", 900<<10)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "pi-node-0-0-abcde", Namespace: "team", UID: "uid-1", ResourceVersion: "7",
			Labels:          map[string]string{api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "0", "padding": strings.Repeat("y", 63)},
			Annotations:     map[string]string{"padding": big, api.AnnotationJobSetRestarts: "2", mpi.MultusNetworkStatus: `[{"name":"cbr0"}]`},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "pi-node-0", UID: "uid-0", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		}
	}
	keptLabels := map[string]string{api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "0"}
	memory, gpus := resource.MustParse("16Gi"), resource.MustParse("8")
	pod := &corev1.Pod{ObjectMeta: meta(), Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, NodeName: "node-a",
		Containers: []corev1.Container{{Name: "node", Image: "mpi:1", Command: []string{big},
			Env:          []corev1.EnvVar{{Name: "A", Value: big}, {Name: mpi.EnvNCCLSocketIfName, Value: "net1," + big}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: mpi.SSHVolume, MountPath: "/home/mpiuser/.ssh", SubPath: mpi.SSHDirSubPath}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: memory, corev1.ResourceCPU: resource.MustParse("2"),
				"nvidia.com/gpu": gpus, "amd.com/gpu": gpus, "example.com/gpu": gpus, "rdma/ib": gpus}}}},
		Volumes: []corev1.Volume{{Name: "v"}},
	}, Status: corev1.PodStatus{Phase: corev1.PodRunning, Message: "running"}}

	tests := map[string]struct {
		transform func(any) (any, error)
		in        any
		want      any
	}{
		"pod": {podCacheTransform, pod, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0-abcde", Namespace: "team", UID: "uid-1", ResourceVersion: "7", Labels: keptLabels,
				Annotations: map[string]string{mpi.MultusNetworkStatus: `[{"name":"cbr0"}]`}, OwnerReferences: pod.OwnerReferences},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: "node-a", Containers: []corev1.Container{{Name: "node", Image: "mpi:1",
				// Memory, and the first GPUs of the bound by name.
				Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: memory, "amd.com/gpu": gpus, "example.com/gpu": gpus}},
				Env:          []corev1.EnvVar{{Name: mpi.EnvNCCLSocketIfName, Value: ("net1," + big)[:maxCachedEnvValue]}},
				VolumeMounts: []corev1.VolumeMount{{Name: mpi.SSHVolume, MountPath: "/home/mpiuser/.ssh", SubPath: mpi.SSHDirSubPath}}}}},
			Status: pod.Status,
		}},
		"secret": {secretCacheTransform, &corev1.Secret{ObjectMeta: meta(), Data: map[string][]byte{"ssh-privatekey": []byte(big)}, Type: corev1.SecretTypeOpaque},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0-abcde", Namespace: "team", UID: "uid-1", ResourceVersion: "7", Labels: keptLabels,
				Annotations: map[string]string{api.AnnotationJobSetRestarts: "2"}, OwnerReferences: pod.OwnerReferences}, Type: corev1.SecretTypeOpaque}},
		"config map": {metadataCacheTransform, &corev1.ConfigMap{ObjectMeta: meta(), Data: map[string]string{"a": big}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0-abcde", Namespace: "team", UID: "uid-1", ResourceVersion: "7", Labels: keptLabels, OwnerReferences: pod.OwnerReferences}}},
		"network policy": {metadataCacheTransform, &networkingv1.NetworkPolicy{ObjectMeta: meta(), Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Ingress"}}},
			&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0-abcde", Namespace: "team", UID: "uid-1", ResourceVersion: "7", Labels: keptLabels, OwnerReferences: pod.OwnerReferences}}},
		"node": {nodeCacheTransform, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}, Annotations: map[string]string{"a": big}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"rdma/ib": resource.MustParse("4")}, Images: []corev1.ContainerImage{{Names: []string{big}}}}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"rdma/ib": resource.MustParse("4")}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.transform(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			data, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > 2<<10 {
				t.Errorf("the cache keeps %d bytes of a user's %s", len(data), name)
			}
		})
	}
}

// builtJobSet is the JobSet Torus builds for a TrainJob pi of nodes nodes
// on an Open MPI runtime, with the job it resolved.
func builtJobSet(t *testing.T, nodes int32) (*trainer.TrainJob, *mpi.Job, *jobsetv1alpha2.JobSet) {
	t.Helper()
	rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI).Runtime()
	tj := wrappers.MakeTrainJob("pi", "ns").UID("uid-1").RuntimeRef("rt").NumNodes(nodes).Obj()
	job, err := mpi.ResolveJob(tj, rt)
	if err != nil {
		t.Fatal(err)
	}
	js, err := children.BuildJobSet(tj, rt, job, children.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tj, job, js
}

// The operator's diagnosis, status and network check read pods from the
// cache: what podCacheTransform keeps must tell them what the whole pod
// would. Pods are made from a JobSet Torus builds, with the statuses the
// kubelet reports for each cause the diagnosis knows.
func TestDiagnosisOfCachedPodsIsTheDiagnosisOfPods(t *testing.T) {
	_, job, js := builtJobSet(t, 2)
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	terminated := func(reason string, code int32, message string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Message: message, FinishedAt: t0}}
	}
	statuses := map[string]corev1.PodStatus{
		"OOMKilled": {Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer, State: terminated("OOMKilled", 137, "")}}},
		"ssh refused": {Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer,
			State: terminated("Error", 255, "ssh: connect to host pi-node-0-0.pi port 2222: Connection refused\n")}}},
		"image pull": {Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}},
		"unschedulable": {Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/4 nodes are available", LastTransitionTime: t0}}},
		"evicted":    {Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."},
		"init crash": {Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: mpi.SSHInitContainer, RestartCount: 3, State: terminated("Error", 1, "chmod: Operation not permitted")}}},
		// The fixes name the GPUs per worker and NCCL's interfaces.
		"NCCL duplicate GPU": {Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer,
			State: terminated("Error", 1, "NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60\n")}}},
		"no GPU visible": {Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer,
			State: terminated("Error", 1, "RuntimeError: No CUDA GPUs are available\n")}}},
		"NCCL without an interface": {Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer,
			State: terminated("Error", 1, "NCCL WARN Bootstrap : no socket interface found\n")}}},
	}
	for name, status := range statuses {
		t.Run(name, func(t *testing.T) {
			var pods []corev1.Pod
			for _, rj := range js.Spec.ReplicatedJobs {
				tpl := rj.Template.Spec.Template
				p := corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *tpl.Spec.DeepCopy(), Status: *status.DeepCopy()}
				p.Name, p.Namespace = "pi-"+rj.Name+"-0-0-abcde", "ns"
				if p.Labels == nil {
					p.Labels = map[string]string{}
				}
				p.Labels["batch.kubernetes.io/job-completion-index"] = "0"
				for i := range p.Spec.Containers {
					if c := &p.Spec.Containers[i]; c.Name == mpi.TrainerContainer {
						c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
						c.Env = append(c.Env, corev1.EnvVar{Name: mpi.EnvNCCLSocketIfName, Value: "ib9"})
					}
				}
				pods = append(pods, p)
			}
			cached := make([]corev1.Pod, len(pods))
			for i := range pods {
				out, err := podCacheTransform(pods[i].DeepCopy())
				if err != nil {
					t.Fatal(err)
				}
				cached[i] = *out.(*corev1.Pod)
			}
			want, got := diagnosis.Pods(pods, job.Placement()), diagnosis.Pods(cached, job.Placement())
			if len(want) == 0 {
				t.Fatal("the pods have no finding: the case tests nothing")
			}
			if diff := cmp.Diff(messages(want), messages(got)); diff != "" {
				t.Errorf("findings (-pod +cached pod):\n%s", diff)
			}
		})
	}
}

// A JobSet Torus builds keeps through the cache everything the operator
// and upstream's framework read of it: the record of the job, the marks
// Torus writes, its controller, suspend, and the JobSet controller's status.
func TestCachedJobSetKeepsWhatIsRead(t *testing.T) {
	tj, job, js := builtJobSet(t, 4)
	js.Annotations[api.AnnotationProof] = strings.Repeat("p", 64)
	js.Annotations[api.AnnotationSpecHash] = strings.Repeat("h", 16)
	js.Annotations[api.AnnotationSuspendedByTorus] = "true"
	js.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.SchemeGroupVersion.WithKind("TrainJob"))}
	js.Spec.Suspend = ptr.To(true)
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	js.Status = jobsetv1alpha2.JobSetStatus{
		Restarts: 2, RestartsCountTowardsMax: 1, TerminalState: string(jobsetv1alpha2.JobSetFailed),
		Conditions: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue, Reason: "FailedJobs",
			Message: "jobset failed due to reaching max number of restarts", LastTransitionTime: t0}},
		ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: mpi.LauncherJob, Failed: 1}, {Name: mpi.NodeJob, Active: 4, Ready: 4}},
	}
	out, err := jobSetCacheTransform(js.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cached := out.(*jobsetv1alpha2.JobSet)
	for _, k := range []string{api.AnnotationJob, api.AnnotationProof, api.AnnotationSpecHash, api.AnnotationSuspendedByTorus} {
		if cached.Annotations[k] != js.Annotations[k] {
			t.Errorf("annotation %s: cached %q, want %q", k, cached.Annotations[k], js.Annotations[k])
		}
	}
	if got, ok := mpi.DecodeJob(cached.Annotations[api.AnnotationJob]); !ok || got.Workers != job.Workers {
		t.Errorf("the cached record does not decode to the job: %+v", got)
	}
	if !metav1.IsControlledBy(cached, tj) {
		t.Error("the cached JobSet lost its controller")
	}
	if diff := cmp.Diff(js.Status, cached.Status); diff != "" {
		t.Errorf("status (-JobSet +cached):\n%s", diff)
	}
	if !ptr.Deref(cached.Spec.Suspend, false) || len(cached.Spec.ReplicatedJobs) != len(js.Spec.ReplicatedJobs) {
		t.Errorf("spec kept: suspend %v, %d replicated jobs", cached.Spec.Suspend, len(cached.Spec.ReplicatedJobs))
	}
	for i, rj := range cached.Spec.ReplicatedJobs {
		if rj.Name != js.Spec.ReplicatedJobs[i].Name || rj.Replicas != js.Spec.ReplicatedJobs[i].Replicas {
			t.Errorf("replicated job %d: cached %s x%d, want %s x%d", i, rj.Name, rj.Replicas, js.Spec.ReplicatedJobs[i].Name, js.Spec.ReplicatedJobs[i].Replicas)
		}
	}
}

func messages(fs []diagnosis.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Message() + " | " + f.Fix
	}
	return out
}

// Each kind the operator caches from users' namespaces, with every field a
// user can write filled as far as the API server lets them: what the cache
// keeps stays within a fixed bound, whatever they wrote.
func TestCacheTransformsAtTheirWorst(t *testing.T) {
	const mib = 1 << 20
	long := func(n int) string { return strings.Repeat("z", n) }
	meta := func() metav1.ObjectMeta {
		m := metav1.ObjectMeta{
			Name: "pi-node-0-0-abcde", Namespace: "team", UID: "uid-1", ResourceVersion: "7",
			Labels: map[string]string{api.LabelJobName: long(63), api.LabelRole: long(63)},
			Annotations: map[string]string{
				api.AnnotationProof: long(mib / 4), api.AnnotationJobSetRestarts: long(mib / 4),
				api.AnnotationWorkersReady: long(mib / 4), mpi.MultusNetworkStatus: long(mib / 4),
			},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "pi-node-0", UID: "uid-0", Controller: ptr.To(true)}},
		}
		for i := range 2000 {
			m.Finalizers = append(m.Finalizers, "example.com/"+long(240)+strconv.Itoa(i))
			m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{Kind: long(60), Name: long(250), UID: types.UID(strconv.Itoa(i))})
		}
		return m
	}
	containers := func() []corev1.Container {
		var cs []corev1.Container
		for i := range 200 {
			c := corev1.Container{Name: "c" + strconv.Itoa(i), Image: "registry.example/" + long(4096)}
			for p := range 100 {
				c.Ports = append(c.Ports, corev1.ContainerPort{Name: "p" + strconv.Itoa(p), ContainerPort: int32(1000 + p)})
			}
			cs = append(cs, c)
		}
		return cs
	}
	pod := &corev1.Pod{ObjectMeta: meta(), Spec: corev1.PodSpec{Containers: containers(), InitContainers: containers()}}
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}}
	for i := range 2000 {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/" + long(240) + strconv.Itoa(i)})
	}
	event := &corev1.Event{ObjectMeta: meta(), InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "pi-node-0"},
		Reason: diagnosis.ReasonFailedCreate, Message: "Error creating: " + long(mib), Source: corev1.EventSource{Component: long(mib / 4)},
		Related: &corev1.ObjectReference{Name: long(mib / 4)}}

	// As many of each list as fit the API server's request size, each
	// entry as long as validation allows.
	jobSet := &jobsetv1alpha2.JobSet{ObjectMeta: meta()}
	jobSet.Annotations[api.AnnotationJob] = long(mpi.MaxJobRecord)
	jobSet.Annotations[api.AnnotationSpecHash] = long(mib / 4)
	template := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers()[:1]}}}}
	jobSet.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{}
	for i := range 200 {
		name := long(60) + strconv.Itoa(i)
		jobSet.Spec.ReplicatedJobs = append(jobSet.Spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1, Template: template})
		jobSet.Spec.FailurePolicy.Rules = append(jobSet.Spec.FailurePolicy.Rules, jobsetv1alpha2.FailurePolicyRule{Name: long(128) + strconv.Itoa(i), OnJobFailureReasons: []string{long(1024)}})
		jobSet.Status.ReplicatedJobsStatus = append(jobSet.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: name})
		jobSet.Status.Conditions = append(jobSet.Status.Conditions, metav1.Condition{Type: long(312) + strconv.Itoa(i), Reason: long(1024), Message: long(4 << 10)})
	}

	tests := map[string]struct {
		transform func(any) (any, error)
		in        any
		max       int
	}{
		"pod":            {podCacheTransform, pod, 40 << 10},
		"jobset":         {jobSetCacheTransform, jobSet, mpi.MaxJobRecord + 24<<10},
		"secret":         {secretCacheTransform, &corev1.Secret{ObjectMeta: meta()}, 2 << 10},
		"config map":     {metadataCacheTransform, &corev1.ConfigMap{ObjectMeta: meta()}, 2 << 10},
		"network policy": {metadataCacheTransform, &networkingv1.NetworkPolicy{ObjectMeta: meta()}, 2 << 10},
		"job":            {metadataCacheTransform, &batchv1.Job{ObjectMeta: meta()}, 2 << 10},
		"event":          {eventCacheTransform, event, 4 << 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.transform(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			kept, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("a %s of %d KiB keeps %d bytes", name, len(in)>>10, len(kept))
			if len(kept) > tc.max {
				t.Errorf("the cache keeps %d bytes of a user's %s of %d KiB, over %d", len(kept), name, len(in)>>10, tc.max)
			}
			o := got.(metav1.Object)
			if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "uid-0" {
				t.Errorf("owners kept: %d, want the controller alone", len(refs))
			}
		})
	}
	// What Torus reads survives: its gate, and a cut message that still
	// says what refused the pods.
	p, _ := podCacheTransform(pod)
	if gates := p.(*corev1.Pod).Spec.SchedulingGates; len(gates) != 1 || gates[0].Name != api.SchedulingGateSSHKeys {
		t.Errorf("gates kept: %v", gates)
	}
	e, _ := eventCacheTransform(event)
	if msg := e.(*corev1.Event).Message; !strings.HasPrefix(msg, "Error creating: ") || len(msg) != maxCachedEventMessage {
		t.Errorf("message kept: %d bytes", len(msg))
	}
}

// What the cache keeps of a long string is a copy: a slice of it would keep
// the whole string in memory, however little of it the object shows.
func TestCacheKeepsNoSliceOfWhatItCuts(t *testing.T) {
	long := strings.Repeat("z", 1<<20)
	within := func(kept, of string) bool {
		if kept == "" {
			return false
		}
		k, o := uintptr(unsafe.Pointer(unsafe.StringData(kept))), uintptr(unsafe.Pointer(unsafe.StringData(of)))
		return k >= o && k < o+uintptr(len(of))
	}
	e, _ := eventCacheTransform(&corev1.Event{Reason: diagnosis.ReasonFailedCreate, Message: long})
	p, _ := podCacheTransform(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: long}}}})
	for name, kept := range map[string]string{
		"an event's message":  e.(*corev1.Event).Message,
		"a container's image": p.(*corev1.Pod).Spec.Containers[0].Image,
	} {
		if kept == "" || len(kept) >= len(long) {
			t.Errorf("%s: kept %d bytes, want a cut", name, len(kept))
		}
		if within(kept, long) {
			t.Errorf("%s: the cut shares the memory of the whole", name)
		}
	}
}
