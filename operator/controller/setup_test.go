package controller

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
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
	memory := resource.MustParse("16Gi")
	pod := &corev1.Pod{ObjectMeta: meta(), Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, NodeName: "node-a",
		Containers: []corev1.Container{{Name: "node", Image: "mpi:1", Command: []string{big}, Env: []corev1.EnvVar{{Name: "A", Value: big}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: memory, corev1.ResourceCPU: resource.MustParse("2")}}}},
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
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: memory}}}}},
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
