package mpi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
)

// Multus and the SR-IOV network operator's names.
const (
	// multusNetworks is the pod annotation listing networks to attach.
	multusNetworks = nadv1.NetworkAttachmentAnnot
	// MultusNetworkStatus is the pod annotation Multus writes with what it
	// attached.
	MultusNetworkStatus = nadv1.NetworkStatusAnnot
	// NADResourceName is the NetworkAttachmentDefinition annotation naming
	// the device plugin resource behind the network.
	NADResourceName = "k8s.v1.cni.cncf.io/resourceName"

	shmVolume = "mpi-dshm"
	shmPath   = "/dev/shm"
)

// NetworkPlan is an MPINetworkProfile resolved for one job: the attachments
// with their device resources, and what the job's containers need.
type NetworkPlan struct {
	Profile          string
	Networks         []PlannedNetwork
	Capabilities     []corev1.Capability
	SharedMemorySize *resource.Quantity
	// Env holds the profile's variables for the job's implementation.
	Env     []corev1.EnvVar
	AllPods bool
	// FailOnMissing fails a job whose pods lack an interface.
	FailOnMissing bool
}

// PlannedNetwork is one attachment.
type PlannedNetwork struct {
	Namespace, Name, Interface string
	Resource                   corev1.ResourceName
	Count                      int64
	RDMA                       bool
}

// StatusName is how Multus names the network in network-status.
func (n PlannedNetwork) StatusName() string { return n.Namespace + "/" + n.Name }

// NADGetter reads a NetworkAttachmentDefinition; nil, nil when it does not
// exist.
type NADGetter func(namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)

// PlanNetworks resolves a profile for a job in a namespace. It returns the
// plan, or the problems that keep the job from starting, each saying what to
// fix.
func PlanNetworks(p *torusv1alpha1.MPINetworkProfile, jobNamespace string, impl Implementation, getNAD NADGetter) (*NetworkPlan, []string, error) {
	plan := &NetworkPlan{
		Profile:          p.Name,
		Capabilities:     p.Spec.Capabilities,
		SharedMemorySize: p.Spec.SharedMemorySize,
		AllPods:          p.Spec.ApplyTo == torusv1alpha1.ApplyToAllPods,
		FailOnMissing:    ptr.Deref(p.Spec.FailOnMissingNetworks, true),
	}
	if len(plan.Capabilities) == 0 {
		plan.Capabilities = []corev1.Capability{"IPC_LOCK"}
	}
	var problems []string
	for _, n := range p.Spec.Networks {
		ns := n.Namespace
		if ns == "" {
			ns = jobNamespace
		}
		planned := PlannedNetwork{Namespace: ns, Name: n.Name, Interface: n.Interface,
			Resource: corev1.ResourceName(n.ResourceName), Count: int64(ptr.Deref(n.ResourceCount, 1)), RDMA: n.RDMA}
		nad, err := getNAD(ns, n.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("reading NetworkAttachmentDefinition %s/%s: %w", ns, n.Name, err)
		}
		switch {
		case nad == nil:
			problems = append(problems, fmt.Sprintf("NetworkAttachmentDefinition %s/%s of MPINetworkProfile %s does not exist: create it (the SR-IOV operator makes one per SriovNetwork or SriovIBNetwork) or fix the profile", ns, n.Name, p.Name))
		case planned.Resource == "":
			if rn := nad.Annotations[NADResourceName]; rn != "" {
				planned.Resource = corev1.ResourceName(rn)
			} else {
				problems = append(problems, fmt.Sprintf("NetworkAttachmentDefinition %s/%s has no %s annotation and MPINetworkProfile %s sets no resourceName for it: Torus cannot tell which device to request; set networks[].resourceName in the profile", ns, n.Name, NADResourceName, p.Name))
			}
		}
		plan.Networks = append(plan.Networks, planned)
	}
	for _, e := range p.Spec.Env {
		if e.Implementation == "" || Implementation(e.Implementation) == impl {
			plan.Env = UpsertEnv(plan.Env, e.EnvVar)
		}
	}
	return plan, problems, nil
}

// Resources sums the device resources each pod requests.
func (p *NetworkPlan) Resources() corev1.ResourceList {
	rl := corev1.ResourceList{}
	for _, n := range p.Networks {
		if n.Resource == "" {
			continue
		}
		q := rl[n.Resource]
		q.Add(*resource.NewQuantity(n.Count, resource.DecimalSI))
		rl[n.Resource] = q
	}
	return rl
}

// Apply attaches the plan's networks to a pod template and gives
// its MPI container the devices, capabilities, /dev/shm and environment.
// It runs before admission, so Kueue counts the devices.
func (p *NetworkPlan) Apply(pod *corev1.PodTemplateSpec, ctr *corev1.Container) error {
	elems := make([]nadv1.NetworkSelectionElement, 0, len(p.Networks))
	for _, n := range p.Networks {
		elems = append(elems, nadv1.NetworkSelectionElement{Name: n.Name, Namespace: n.Namespace, InterfaceRequest: n.Interface})
	}
	data, err := json.Marshal(elems)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", multusNetworks, err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[multusNetworks] = string(data)

	for name, q := range p.Resources() {
		// Extended resources are requested and limited alike.
		for _, rl := range []*corev1.ResourceList{&ctr.Resources.Requests, &ctr.Resources.Limits} {
			if *rl == nil {
				*rl = corev1.ResourceList{}
			}
			(*rl)[name] = q
		}
	}
	if len(p.Capabilities) > 0 {
		if ctr.SecurityContext == nil {
			ctr.SecurityContext = &corev1.SecurityContext{}
		}
		if ctr.SecurityContext.Capabilities == nil {
			ctr.SecurityContext.Capabilities = &corev1.Capabilities{}
		}
		for _, c := range p.Capabilities {
			if !slices.Contains(ctr.SecurityContext.Capabilities.Add, c) {
				ctr.SecurityContext.Capabilities.Add = append(ctr.SecurityContext.Capabilities.Add, c)
			}
		}
	}
	if p.SharedMemorySize != nil {
		size := p.SharedMemorySize.DeepCopy()
		pod.Spec.Volumes = UpsertVolume(pod.Spec.Volumes, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size},
		}})
		ctr.VolumeMounts = UpsertMount(ctr.VolumeMounts, corev1.VolumeMount{Name: shmVolume, MountPath: shmPath})
	}
	ctr.Env = UpsertEnv(ctr.Env, p.Env...)
	return nil
}

// NodeProblems says which device resources of the plan no node offers;
// pods asking for them would wait unschedulable with no word why.
func NodeProblems(plan *NetworkPlan, nodes []corev1.Node) []string {
	want := plan.Resources()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, string(n))
	}
	slices.Sort(names)
	var problems []string
	for _, n := range names {
		q := want[corev1.ResourceName(n)]
		found := false
		for i := range nodes {
			if a, ok := nodes[i].Status.Allocatable[corev1.ResourceName(n)]; ok && a.Cmp(q) >= 0 {
				found = true
				break
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("no node has %s allocatable %s (MPINetworkProfile %s asks each pod for it): check that the device plugin (SR-IOV network device plugin or RDMA shared device plugin) runs on the nodes, and the resource name", q.String(), n, plan.Profile))
		}
	}
	return problems
}

// PodAttachments describes the secondary networks Multus reports on a pod,
// one entry per interface: "ib0 192.168.1.7 rdma mlx5_3 (mpi-networks/ib)".
func PodAttachments(p *corev1.Pod) []string {
	data := p.Annotations[MultusNetworkStatus]
	if data == "" {
		return nil
	}
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(data), &statuses); err != nil {
		return []string{"unreadable " + MultusNetworkStatus + ": " + err.Error()}
	}
	var out []string
	for _, st := range statuses {
		if st.Default {
			continue
		}
		s := st.Interface
		if len(st.IPs) > 0 {
			s += " " + st.IPs[0]
		}
		if st.DeviceInfo != nil && st.DeviceInfo.Pci != nil && st.DeviceInfo.Pci.RdmaDevice != "" {
			s += " rdma " + st.DeviceInfo.Pci.RdmaDevice
		}
		out = append(out, s+" ("+st.Name+")")
	}
	return out
}

// PodSecurityNeeds says what a namespace must allow for pods that add caps,
// "" when the restricted policies allow them (NET_BIND_SERVICE only): the
// restricted and baseline Pod Security levels refuse other added
// capabilities, and so does OpenShift's restricted-v2 SCC.
func PodSecurityNeeds(caps []corev1.Capability) string {
	var extra []string
	for _, c := range caps {
		if c != "NET_BIND_SERVICE" {
			extra = append(extra, string(c))
		}
	}
	if len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("its rank pods add capabilities %s, which need the namespace's Pod Security level privileged "+
		"(label pod-security.kubernetes.io/enforce=privileged) and, on OpenShift, an SCC that allows them for the job's ServiceAccount "+
		"(restricted-v2 does not; see docs/admins/openshift.md)", strings.Join(extra, ","))
}
