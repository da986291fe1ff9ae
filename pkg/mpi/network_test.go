package mpi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
)

func TestPlanNetworks(t *testing.T) {
	nads := map[string]*nadv1.NetworkAttachmentDefinition{
		"net/ib":    {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NADResourceName: "openshift.io/mlnxib"}}},
		"job/local": {ObjectMeta: metav1.ObjectMeta{}},
	}
	get := func(ns, name string) (*nadv1.NetworkAttachmentDefinition, error) { return nads[ns+"/"+name], nil }
	env := []torusv1alpha1.ProfileEnv{
		{EnvVar: corev1.EnvVar{Name: "NCCL_IB_HCA", Value: "mlx5"}},
		{EnvVar: corev1.EnvVar{Name: "OMPI_MCA_pml", Value: "ucx"}, Implementation: "OpenMPI"},
		{EnvVar: corev1.EnvVar{Name: "I_MPI_FABRICS", Value: "shm:ofi"}, Implementation: "Intel"},
	}
	cases := map[string]struct {
		networks      []torusv1alpha1.NetworkAttachment
		impl          Implementation
		wantResources corev1.ResourceList
		wantEnv       []string
		wantProblems  int
	}{
		"the resource comes from the NAD's annotation": {
			networks:      []torusv1alpha1.NetworkAttachment{{Name: "ib", Namespace: "net"}},
			impl:          OpenMPI,
			wantResources: corev1.ResourceList{"openshift.io/mlnxib": resource.MustParse("1")},
			wantEnv:       []string{"NCCL_IB_HCA", "OMPI_MCA_pml"},
		},
		"an override wins, counts add up": {
			networks: []torusv1alpha1.NetworkAttachment{
				{Name: "ib", Namespace: "net", ResourceName: "rdma/hca", ResourceCount: ptr.To[int32](2)},
				{Name: "local", ResourceName: "rdma/hca"},
			},
			impl:          IntelMPI,
			wantResources: corev1.ResourceList{"rdma/hca": resource.MustParse("3")},
			wantEnv:       []string{"NCCL_IB_HCA", "I_MPI_FABRICS"},
		},
		"no resource and no override": {
			networks:     []torusv1alpha1.NetworkAttachment{{Name: "local"}},
			impl:         MPICH,
			wantProblems: 1,
		},
		"a missing NAD": {
			networks:     []torusv1alpha1.NetworkAttachment{{Name: "gone", Namespace: "net"}},
			impl:         MPICH,
			wantProblems: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &torusv1alpha1.MPINetworkProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: torusv1alpha1.MPINetworkProfileSpec{Networks: tc.networks, Env: env}}
			plan, problems, err := PlanNetworks(p, "job", tc.impl, get)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != tc.wantProblems {
				t.Fatalf("problems = %q, want %d", problems, tc.wantProblems)
			}
			if tc.wantProblems > 0 {
				return
			}
			if diff := cmp.Diff(tc.wantResources, plan.Resources()); diff != "" {
				t.Errorf("resources (-want,+got):\n%s", diff)
			}
			var names []string
			for _, e := range plan.Env {
				names = append(names, e.Name)
			}
			if diff := cmp.Diff(tc.wantEnv, names); diff != "" {
				t.Errorf("env (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff([]corev1.Capability{"IPC_LOCK"}, plan.Capabilities); diff != "" {
				t.Errorf("capabilities default to IPC_LOCK (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNodeProblemsAndAttachments(t *testing.T) {
	plan := &NetworkPlan{Profile: "ib", Networks: []PlannedNetwork{{Resource: "rdma/hca", Count: 2}}}
	node := func(q string) corev1.Node {
		return corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"rdma/hca": resource.MustParse(q)}}}
	}
	if got := NodeProblems(plan, []corev1.Node{node("1"), node("2")}); len(got) != 0 {
		t.Errorf("a node offers 2: problems %q", got)
	}
	if got := NodeProblems(plan, []corev1.Node{node("1")}); len(got) != 1 {
		t.Errorf("no node offers 2: problems %q, want one", got)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{MultusNetworkStatus: `[
		{"name":"cbr0","interface":"eth0","ips":["10.244.0.5"],"default":true},
		{"name":"net/ib","interface":"ib0","ips":["192.168.1.7"],"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.2","rdma-device":"mlx5_3"}}}]`}}}
	if diff := cmp.Diff([]string{"ib0 192.168.1.7 rdma mlx5_3 (net/ib)"}, PodAttachments(pod)); diff != "" {
		t.Errorf("PodAttachments (-want,+got):\n%s", diff)
	}
}

func TestPodSecurityNeeds(t *testing.T) {
	cases := []struct {
		caps []corev1.Capability
		want string
	}{
		{nil, ""},
		{[]corev1.Capability{"NET_BIND_SERVICE"}, ""},
		{[]corev1.Capability{"IPC_LOCK"}, "add capabilities IPC_LOCK, which need the namespace's Pod Security level privileged"},
		{[]corev1.Capability{"NET_BIND_SERVICE", "IPC_LOCK", "SYS_RESOURCE"}, "capabilities IPC_LOCK,SYS_RESOURCE"},
	}
	for _, tc := range cases {
		got := PodSecurityNeeds(tc.caps)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("PodSecurityNeeds(%v) = %q, want it to say %q", tc.caps, got, tc.want)
		}
		if tc.want != "" && !strings.Contains(got, "SCC") {
			t.Errorf("PodSecurityNeeds(%v) = %q names no SCC for OpenShift", tc.caps, got)
		}
	}
}
