// Package imagevolume tells which nodes mount image volumes (an OCI image
// mounted read-only into a pod, with no container run), and whether every
// node a pod may run on does: Torus delivers its launch agent that way
// where it can, and kubectl mpi doctor names the nodes that cannot.
package imagevolume

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	schedulinghelpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// runtimes are the first releases of each container runtime that mount
// image volumes, and kubelet the kubelet's first with them on by default.
var (
	runtimes = map[string]*version.Version{
		"containerd": version.MustParseGeneric("2.1.0"),
		"cri-o":      version.MustParseGeneric("1.31.0"),
	}
	kubelet = version.MustParseGeneric("1.35.0")
)

// Unsupported says why a node does not mount image volumes, from the
// versions its kubelet reports; "" where it does.
func Unsupported(info corev1.NodeSystemInfo) string {
	v, err := version.ParseGeneric(info.KubeletVersion)
	switch {
	case err != nil:
		return fmt.Sprintf("kubelet %s, not a Kubernetes release", orUnknown(info.KubeletVersion))
	case v.LessThan(kubelet):
		return fmt.Sprintf("kubelet %s: before 1.35 image volumes are off unless the ImageVolume feature gate is on", info.KubeletVersion)
	}
	name, ver, ok := strings.Cut(info.ContainerRuntimeVersion, "://")
	first, known := runtimes[name]
	if !ok || !known {
		return fmt.Sprintf("runtime %s, not known to mount image volumes", orUnknown(info.ContainerRuntimeVersion))
	}
	if v, err := version.ParseGeneric(ver); err != nil || v.LessThan(first) {
		return fmt.Sprintf("%s %s: image volumes need %s", name, ver, first)
	}
	return ""
}

// MountedWherever reports whether every node that pods of each spec may
// be placed on mounts image volumes, and at least one such node exists
// for each. A node is a place for a pod when it matches the pod's node
// selector and required node affinity and carries no NoSchedule or
// NoExecute taint the pod does not tolerate, as the scheduler filters
// them. Later admission (a Kueue flavor's node labels, a namespace's node
// selector) only narrows these nodes, so what holds here holds there; a
// node that joins afterwards is not known here.
func MountedWherever(nodes []corev1.Node, specs ...*corev1.PodSpec) bool {
	for _, spec := range specs {
		affinity := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec})
		places := 0
		for i := range nodes {
			n := &nodes[i]
			if fits, err := affinity.Match(n); err != nil || !fits {
				continue
			}
			if _, untolerated := schedulinghelpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, spec.Tolerations, blocksScheduling, false); untolerated {
				continue
			}
			if Unsupported(n.Status.NodeInfo) != "" {
				return false
			}
			places++
		}
		if places == 0 {
			return false
		}
	}
	return len(specs) > 0
}

// blocksScheduling keeps the taints that keep a pod off a node.
func blocksScheduling(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
