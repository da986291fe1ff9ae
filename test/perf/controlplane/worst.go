package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// The worst case of each kind the operator caches from users' namespaces:
// an object carrying Torus's job-name label (so the operator's cache holds
// it) with every field a user may write filled as far as the API server
// accepts: the annotations Torus keeps at the 256 KiB the API server allows
// in all, a thousand finalizers and owner references, and, by kind, a
// hundred containers of sixteen ports and 4 KiB images, a thousand
// scheduling gates, 256 KiB of data, or a 640 KiB message (etcd takes
// no more beside the rest: 1.5 MiB an object). What the
// operator's heap grows by per object is the figure; the objects' own
// sizes are in the report beside it.

const worstCount = 20

func long(n int) string { return strings.Repeat("z", n) }

func worstMeta(kind string, i int) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name: fmt.Sprintf("worst-%s-%d", kind, i), Namespace: nsTenant,
		Labels: map[string]string{api.LabelJobName: long(63), api.LabelRole: long(63), jobsetv1alpha2.JobSetNameKey: long(63)},
		Annotations: map[string]string{
			api.AnnotationProof: long(60 << 10), api.AnnotationJobSetRestarts: long(60 << 10),
			api.AnnotationWorkersReady: long(60 << 10), mpi.MultusNetworkStatus: long(60 << 10),
		},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "pi-node-0", UID: "uid-0", Controller: ptr.To(true)}},
	}
	for j := range 1000 {
		m.Finalizers = append(m.Finalizers, fmt.Sprintf("example.com/%s%04d", long(58), j))
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{
			APIVersion: "example.com/v1", Kind: long(60), Name: long(250), UID: types.UID(strconv.Itoa(j))})
	}
	return m
}

func worstPod(i int) client.Object {
	p := &corev1.Pod{ObjectMeta: worstMeta("pod", i)}
	for c := range 100 {
		ctr := corev1.Container{Name: "c" + strconv.Itoa(c), Image: "registry.example/" + long(4000)}
		for port := range 16 {
			ctr.Ports = append(ctr.Ports, corev1.ContainerPort{Name: fmt.Sprintf("p%d-%d", c, port), ContainerPort: int32(1000 + port)})
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
	}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}}
	for g := range 1000 {
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: fmt.Sprintf("example.com/%s%04d", long(58), g)})
	}
	return p
}

func worstEvent(i int) client.Object {
	return &corev1.Event{ObjectMeta: worstMeta("event", i),
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: nsTenant, Name: "pi-node-0"},
		Reason:         diagnosis.ReasonFailedCreate, Message: "Error creating: " + long(640<<10), Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: long(16 << 10)}}
}

func worstJob(i int) client.Object {
	return &batchv1.Job{ObjectMeta: worstMeta("job", i), Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.example/" + long(4000)}}},
	}}}
}

// worstCases are the steps of the worst case, one per cached kind.
var worstCases = []struct {
	kind string
	make func(i int) client.Object
}{
	{"Pods", worstPod},
	{"Secrets", func(i int) client.Object {
		return &corev1.Secret{ObjectMeta: worstMeta("secret", i), Data: map[string][]byte{"data": []byte(long(256 << 10))}}
	}},
	{"ConfigMaps", func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: worstMeta("configmap", i), Data: map[string]string{"data": long(256 << 10)}}
	}},
	{"NetworkPolicies", func(i int) client.Object {
		return &networkingv1.NetworkPolicy{ObjectMeta: worstMeta("policy", i)}
	}},
	{"Jobs", worstJob},
	{"FailedCreate Events about a Job", worstEvent},
	{"JobSets", func(i int) client.Object {
		job := worstJob(i).(*batchv1.Job)
		return &jobsetv1alpha2.JobSet{ObjectMeta: worstMeta("jobset", i), Spec: jobsetv1alpha2.JobSetSpec{
			Suspend:        ptr.To(true),
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: job.Spec}}},
		}}
	}},
}

// sizeOf is an object's size as JSON, as the API server is sent it.
func sizeOf(o client.Object) int64 {
	data, _ := json.Marshal(o)
	return int64(len(data))
}
