package imagevolume

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUnsupported(t *testing.T) {
	for name, tc := range map[string]struct {
		kubelet, runtime string
		want             string // a part of the reason; "" where supported
	}{
		"containerd 2.2 on 1.36":        {kubelet: "v1.36.2", runtime: "containerd://v2.2.1"},
		"containerd 2.1 on 1.35":        {kubelet: "v1.35.0", runtime: "containerd://2.1.0"},
		"CRI-O 1.31 on 1.35":            {kubelet: "v1.35.1", runtime: "cri-o://1.31.2"},
		"containerd 1.7":                {kubelet: "v1.35.0", runtime: "containerd://1.7.27", want: "image volumes need 2.1.0"},
		"CRI-O 1.30":                    {kubelet: "v1.35.0", runtime: "cri-o://1.30.4", want: "image volumes need 1.31.0"},
		"a kubelet before 1.35":         {kubelet: "v1.34.3", runtime: "containerd://2.2.0", want: "kubelet v1.34.3"},
		"kwok's nodes, which run none":  {kubelet: "kwok-v0.7.0", runtime: "kwok-v0.7.0", want: "kubelet kwok-v0.7.0"},
		"a runtime Torus does not know": {kubelet: "v1.36.0", runtime: "docker://28.2.2", want: "not known to mount image volumes"},
		"nothing reported":              {want: "kubelet unknown"},
	} {
		t.Run(name, func(t *testing.T) {
			got := Unsupported(corev1.NodeSystemInfo{KubeletVersion: tc.kubelet, ContainerRuntimeVersion: tc.runtime})
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want a reason containing %q", got, tc.want)
			}
		})
	}
}

func TestMountedWherever(t *testing.T) {
	node := func(name, runtime string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.NodeSpec{Taints: taints},
			Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.2", ContainerRuntimeVersion: runtime}},
		}
	}
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	preferOff := corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}
	real := map[string]string{"pool": "real"}
	newer := node("new-0", "containerd://2.2.1", real)
	older := node("old-0", "containerd://1.7.27", map[string]string{"pool": "old"})
	tainted := node("gpu-0", "containerd://1.7.27", nil, gpu)
	soft := node("spot-0", "containerd://1.7.27", nil, preferOff)
	anywhere := &corev1.PodSpec{}
	onReal := &corev1.PodSpec{NodeSelector: real}
	byAffinity := &corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"real"}}},
		}}},
	}}}
	tolerating := &corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}}
	nowhere := &corev1.PodSpec{NodeSelector: map[string]string{"pool": "none"}}

	for name, tc := range map[string]struct {
		nodes []corev1.Node
		specs []*corev1.PodSpec
		want  bool
	}{
		"every node mounts them":                          {nodes: []corev1.Node{newer}, specs: []*corev1.PodSpec{anywhere, anywhere}, want: true},
		"one node the pods may run on does not":           {nodes: []corev1.Node{newer, older}, specs: []*corev1.PodSpec{anywhere}},
		"the node selector keeps the pods off it":         {nodes: []corev1.Node{newer, older}, specs: []*corev1.PodSpec{onReal, onReal}, want: true},
		"required node affinity keeps the pods off it":    {nodes: []corev1.Node{newer, older}, specs: []*corev1.PodSpec{byAffinity}, want: true},
		"one spec of the job may land on it":              {nodes: []corev1.Node{newer, older}, specs: []*corev1.PodSpec{onReal, anywhere}},
		"its taint keeps the pods off it":                 {nodes: []corev1.Node{newer, tainted}, specs: []*corev1.PodSpec{anywhere}, want: true},
		"the pods tolerate its taint":                     {nodes: []corev1.Node{newer, tainted}, specs: []*corev1.PodSpec{tolerating}},
		"a PreferNoSchedule taint does not keep pods off": {nodes: []corev1.Node{newer, soft}, specs: []*corev1.PodSpec{anywhere}},
		"no node the pods may run on":                     {nodes: []corev1.Node{newer}, specs: []*corev1.PodSpec{nowhere}},
		"no node at all":                                  {specs: []*corev1.PodSpec{anywhere}},
		"no pods":                                         {nodes: []corev1.Node{newer}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := MountedWherever(tc.nodes, tc.specs...); got != tc.want {
				t.Errorf("MountedWherever = %v, want %v", got, tc.want)
			}
		})
	}
}
