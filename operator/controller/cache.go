package controller

import (
	"slices"
	"strings"
	"unicode/utf8"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// CacheOptions limits the manager's cache to what Torus reads. Pods,
// Secrets, ConfigMaps and NetworkPolicies are held only when they carry
// Torus's job-name label, and since anyone who may create such an object
// may set that label, each is held as the few fields Torus reads of it
// (the transforms below): what a user's labelled objects cost the operator
// is a small, fixed amount each, whatever their data, annotations or
// containers hold, so no tenant grows the memory of the operator that every
// namespace's admission depends on by writing large objects. The same goes
// for Nodes, of which only their placement, resources and versions are
// read. ConfigMaps, which Torus does not make but upstream's MPI and Flux
// plugins watch, are held to the same label rather than cached
// cluster-wide.
func CacheOptions() cache.Options {
	owned, err := labels.NewRequirement(api.LabelJobName, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant selector
	}
	sel := labels.NewSelector().Add(*owned)
	ofJobSet, err := labels.NewRequirement(jobsetv1alpha2.JobSetNameKey, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant selector
	}
	jobSetJobs := labels.NewSelector().Add(*ofJobSet)
	return cache.Options{
		// Torus never reads managedFields, a large part of what an
		// object holds: it creates, updates and merge-patches, and an
		// update without them keeps the server's.
		// JobSets are transformed here rather than by a ByObject entry,
		// which needs JobSet's API served when the manager is made: the
		// operator starts (and its webhooks serve) before JobSet is
		// installed.
		DefaultTransform: jobSetCacheTransform,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                 {Label: sel, Transform: podCacheTransform},
			&corev1.Secret{}:              {Label: sel, Transform: secretCacheTransform},
			&corev1.ConfigMap{}:           {Label: sel, Transform: metadataCacheTransform},
			&networkingv1.NetworkPolicy{}: {Label: sel, Transform: metadataCacheTransform},
			&corev1.Node{}:                {Transform: nodeCacheTransform},
			// The Jobs of JobSets, as far as a pod's chain of controllers
			// needs them (trainjob.OwnPods).
			&batchv1.Job{}: {Label: jobSetJobs, Transform: metadataCacheTransform},
			// Runtimes keep their managedFields: upstream's framework
			// snapshots a job's runtime whole, as read from the cache,
			// and Torus writes the snapshot upstream would.
			&trainer.ClusterTrainingRuntime{}: {Transform: keep},
			&trainer.TrainingRuntime{}:        {Transform: keep},
			// Only the Job controller's refusals to create pods. Anyone
			// who may create Events in a namespace can write one that
			// matches, so each is held bounded too.
			&corev1.Event{}: {Field: fields.SelectorFromSet(fields.Set{
				"involvedObject.kind": "Job", "reason": diagnosis.ReasonFailedCreate,
			}), Transform: eventCacheTransform},
		},
	}
}

func keep(in any) (any, error) { return in, nil }

// secretCacheTransform keeps a Secret's name, owners and the run its keys
// were made for, and drops its data: Torus reads its keys from the API
// server when it needs them, and upstream's MPI plugin watches Secrets as
// whole objects, which would otherwise keep every job's private keys in the
// operator's memory.
func secretCacheTransform(in any) (any, error) {
	s, ok := in.(*corev1.Secret)
	if !ok {
		return in, nil
	}
	out := &corev1.Secret{TypeMeta: s.TypeMeta, ObjectMeta: keptMetadata(&s.ObjectMeta, annotationJobSetRestarts, annotationQuotaReserved, annotationProof), Type: s.Type, Immutable: s.Immutable}
	return out, nil
}

// metadataCacheTransform keeps of an object only its identity, its owners
// and its job-name label: Torus and upstream's watches read no more of
// ConfigMaps and NetworkPolicies (Torus's policy is made once and never
// compared; upstream reads its snapshots from the API server).
func metadataCacheTransform(in any) (any, error) {
	switch o := in.(type) {
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{TypeMeta: o.TypeMeta, ObjectMeta: keptMetadata(&o.ObjectMeta)}, nil
	case *networkingv1.NetworkPolicy:
		return &networkingv1.NetworkPolicy{TypeMeta: o.TypeMeta, ObjectMeta: keptMetadata(&o.ObjectMeta, annotationProof)}, nil
	case *batchv1.Job:
		return &batchv1.Job{TypeMeta: o.TypeMeta, ObjectMeta: keptMetadata(&o.ObjectMeta)}, nil
	}
	return in, nil
}

// podCacheTransform keeps of a pod what the operator's status, diagnosis
// and network check read: its identity, owners, role and index labels,
// Multus's network-status and Torus's workers-ready mark, its containers'
// names, images, memory limits and SSH and pod-info volume mounts, its
// restart policy and node, and its status. Commands, environment,
// volumes and the rest of the spec go.
func podCacheTransform(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	out := &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: keptMetadata(&p.ObjectMeta, annotationNetworkStatus, annotationWorkersReady),
		Spec: corev1.PodSpec{
			InitContainers: containerSummaries(p.Spec.InitContainers),
			Containers:     containerSummaries(p.Spec.Containers),
			RestartPolicy:  p.Spec.RestartPolicy,
			NodeName:       p.Spec.NodeName,
			// Torus's own gate alone: the operator lifts it and leaves
			// any other to its owner.
			SchedulingGates: torusGates(p.Spec.SchedulingGates),
		},
		Status: p.Status,
	}
	return out, nil
}

// keptLabels are the labels the operator reads or selects by, each within
// the API's bound on a label's value.
var keptLabels = func() []keptAnnotation {
	var out []keptAnnotation
	for _, k := range []string{api.LabelJobName, api.LabelRole, batchv1.JobCompletionIndexAnnotation, jobsetv1alpha2.JobSetNameKey, mpi.LabelJobSetRestartAttempt} {
		out = append(out, keptAnnotation{k, validation.LabelValueMaxLength})
	}
	return out
}()

// keptAnnotation is a label or annotation the cache keeps, up to max bytes
// of value: a longer value is not one Torus or Multus wrote, and is dropped
// whole (a cut value would read as another).
type keptAnnotation struct {
	key string
	max int
}

var (
	// A stamp, a run number and a mark are a few dozen bytes.
	annotationProof          = keptAnnotation{api.AnnotationProof, 256}
	annotationJobSetRestarts = keptAnnotation{api.AnnotationJobSetRestarts, 32}
	annotationQuotaReserved  = keptAnnotation{api.AnnotationQuotaReserved, 64}
	annotationWorkersReady   = keptAnnotation{api.AnnotationWorkersReady, 256}
	// Multus's status lists each attached network's interface, addresses
	// and device: a few hundred bytes a network.
	annotationNetworkStatus = keptAnnotation{mpi.MultusNetworkStatus, 32 << 10}
	// A hash and a mark are a few dozen bytes; a job's record is bounded
	// where it is written (mpi.EncodeJob).
	annotationSpecHash         = keptAnnotation{api.AnnotationSpecHash, 256}
	annotationSuspendedByTorus = keptAnnotation{api.AnnotationSuspendedByTorus, 32}
	annotationJob              = keptAnnotation{api.AnnotationJob, mpi.MaxJobRecord}
)

// Bounds on what a cached JobSet keeps: Torus's JobSets have two
// replicated jobs and upstream's up to four, and the JobSet controller
// writes a handful of conditions, each type and reason a CamelCase word and
// each message a sentence or two on which job failed and why.
const (
	maxCachedReplicatedJobs   = 16
	maxCachedConditions       = 8
	maxCachedConditionReason  = 316
	maxCachedConditionMessage = 1 << 10
)

// Bounds on the lists of a cached pod that its writer chooses the length
// of: a job's pods have a few containers and ports each.
const (
	maxCachedContainers = 16
	maxCachedPorts      = 8
	maxCachedImage      = 512
	// maxCachedMounts and maxCachedMountPath bound the mounts kept of a
	// container: Torus's own, at most two of each of three volumes.
	maxCachedMounts    = 6
	maxCachedMountPath = 256
	// maxCachedLimits bounds the limits kept of a container: its memory
	// and GPUs, of one vendor or two. maxCachedEnvValue bounds the one
	// variable kept, a list of interface names.
	maxCachedLimits   = 3
	maxCachedEnvValue = 256
	// maxCachedEventMessage is what the cache keeps of an event's message;
	// events.k8s.io caps a note at 1 KiB, core/v1 Events at nothing.
	maxCachedEventMessage = 2 << 10
)

// keptMetadata is an object's identity, controller, deletion state, the
// labels Torus reads and the named annotations within their bounds;
// managedFields, finalizers, other owners and everything else a writer may
// make as large as the API server allows go. Torus never updates an object
// it read from these caches (it patches them), so nothing it drops here is
// written back.
func keptMetadata(m *metav1.ObjectMeta, annotations ...keptAnnotation) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp, DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
		Labels:      pickBounded(m.Labels, keptLabels...),
		Annotations: pickBounded(m.Annotations, annotations...),
	}
	// Torus and upstream's watches follow an object's controller alone.
	if c := metav1.GetControllerOfNoCopy(m); c != nil {
		out.OwnerReferences = []metav1.OwnerReference{*c}
	}
	return out
}

// pickBounded is the entries of m under the keys whose values are within
// their bounds, or nil.
func pickBounded(m map[string]string, keys ...keptAnnotation) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k.key]; ok && len(v) <= k.max {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k.key] = v
		}
	}
	return out
}

// torusGates is Torus's own gate, if the pod has it: the one gate the
// operator reads (hasGate).
func torusGates(gates []corev1.PodSchedulingGate) []corev1.PodSchedulingGate {
	if slices.ContainsFunc(gates, func(g corev1.PodSchedulingGate) bool { return g.Name == api.SchedulingGateSSHKeys }) {
		return []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}}
	}
	return nil
}

// eventCacheTransform keeps of a FailedCreate event what the diagnosis
// reads: the Job it is about, its reason, type, times and count, and the
// start of its message.
func eventCacheTransform(in any) (any, error) {
	e, ok := in.(*corev1.Event)
	if !ok {
		return in, nil
	}
	out := &corev1.Event{
		TypeMeta:   e.TypeMeta,
		ObjectMeta: keptMetadata(&e.ObjectMeta),
		InvolvedObject: corev1.ObjectReference{Kind: e.InvolvedObject.Kind, Namespace: e.InvolvedObject.Namespace,
			Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID, APIVersion: e.InvolvedObject.APIVersion},
		Reason: e.Reason, Message: cut(e.Message, maxCachedEventMessage), Type: e.Type, Count: e.Count,
		FirstTimestamp: e.FirstTimestamp, LastTimestamp: e.LastTimestamp, EventTime: e.EventTime,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out, nil
}

// cut cuts s to at most n bytes, at a rune's start. A cut string is a
// copy: a slice of s would keep all of s in memory.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

func containerSummaries(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, min(len(cs), maxCachedContainers))
	for i, c := range cs[:len(out)] {
		out[i] = corev1.Container{Name: c.Name, Image: cut(c.Image, maxCachedImage)}
		// The memory limit an OOMKilled rank exceeded; the GPUs a rank was
		// given and the interfaces NCCL was told to use, which the fixes of
		// GPU failures name.
		kept := []corev1.ResourceName{corev1.ResourceMemory}
		for name := range c.Resources.Limits {
			if mpi.IsGPU(name) {
				kept = append(kept, name)
			}
		}
		slices.Sort(kept[1:])
		for _, name := range kept[:min(len(kept), maxCachedLimits)] {
			if q, ok := c.Resources.Limits[name]; ok {
				if out[i].Resources.Limits == nil {
					out[i].Resources.Limits = corev1.ResourceList{}
				}
				out[i].Resources.Limits[name] = q
			}
		}
		for _, e := range c.Env {
			if e.Name == mpi.EnvNCCLSocketIfName {
				out[i].Env = []corev1.EnvVar{{Name: e.Name, Value: cut(e.Value, maxCachedEnvValue)}}
				break
			}
		}
		// Where the job's sshd configuration is, for the fixes that name
		// it; which container waits for the workers (markWorkersReady);
		// which runs torus-launch, whose exit code 75 says the job lost a
		// host (diagnosis). Torus mounts each at most twice.
		for _, m := range c.VolumeMounts {
			if len(out[i].VolumeMounts) == maxCachedMounts {
				break
			}
			if m.Name == mpi.SSHVolume || m.Name == mpi.PodInfoVolume || m.Name == mpi.LaunchVolume {
				out[i].VolumeMounts = append(out[i].VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: cut(m.MountPath, maxCachedMountPath), SubPath: cut(m.SubPath, maxCachedMountPath)})
			}
		}
		// The port the kubelet probes sshd on, which tells a refused
		// launcher's cause.
		out[i].StartupProbe, out[i].ReadinessProbe = tcpProbe(c.StartupProbe), tcpProbe(c.ReadinessProbe)
		for _, p := range c.Ports[:min(len(c.Ports), maxCachedPorts)] {
			out[i].Ports = append(out[i].Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort})
		}
	}
	return out
}

// tcpProbe keeps of a probe its TCP port, if it checks one.
func tcpProbe(p *corev1.Probe) *corev1.Probe {
	if p == nil || p.TCPSocket == nil {
		return nil
	}
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: p.TCPSocket.Port}}}
}

// nodeCacheTransform keeps of a Node its identity, labels, taints,
// allocatable resources and kubelet and runtime versions: the network
// check asks whether some node offers a profile's device resource, and an
// auto delivery of the launch agent whether the nodes a job's pods may run
// on mount image volumes. A Node's image list and conditions are most of
// its size.
func nodeCacheTransform(in any) (any, error) {
	n, ok := in.(*corev1.Node)
	if !ok {
		return in, nil
	}
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp, Labels: n.Labels},
		Spec: corev1.NodeSpec{Taints: n.Spec.Taints},
		Status: corev1.NodeStatus{Allocatable: n.Status.Allocatable, NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: n.Status.NodeInfo.KubeletVersion, ContainerRuntimeVersion: n.Status.NodeInfo.ContainerRuntimeVersion,
		}},
	}, nil
}

// jobSetCacheTransform keeps of a JobSet what Torus and upstream's
// framework read from the cache: the metadata Torus wrote (its stamp, spec
// hash, suspend mark and job record, each within its bound, and the
// controller), spec.suspend, the replicated jobs' names and counts, and a
// bounded status. The pod templates go: Torus renders the desired JobSet
// afresh on every reconcile and compares it with the cached one by the
// spec-hash annotation; an update starts from the JobSet as the API server
// has it. Anyone who may create JobSets in a namespace chooses the rest, up
// to the API server's object size, and the leader caches every JobSet of the
// cluster. Templates alone are 11 KB of a job of 8 workers.
// Code that needs more of a JobSet must read it from the API server.
//
// Every other kind only loses its managedFields.
func jobSetCacheTransform(in any) (any, error) {
	js, ok := in.(*jobsetv1alpha2.JobSet)
	if !ok {
		return cache.TransformStripManagedFields()(in)
	}
	out := &jobsetv1alpha2.JobSet{
		TypeMeta:   js.TypeMeta,
		ObjectMeta: keptMetadata(&js.ObjectMeta, annotationProof, annotationSpecHash, annotationSuspendedByTorus, annotationJob),
		Spec:       jobsetv1alpha2.JobSetSpec{Suspend: js.Spec.Suspend},
		Status: jobsetv1alpha2.JobSetStatus{
			Restarts: js.Status.Restarts, RestartsCountTowardsMax: js.Status.RestartsCountTowardsMax,
			TerminalState: cut(js.Status.TerminalState, maxCachedConditionReason),
		},
	}
	for _, rj := range js.Spec.ReplicatedJobs[:min(len(js.Spec.ReplicatedJobs), maxCachedReplicatedJobs)] {
		out.Spec.ReplicatedJobs = append(out.Spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{Name: cut(rj.Name, validation.DNS1123LabelMaxLength), Replicas: rj.Replicas})
	}
	for _, rj := range js.Status.ReplicatedJobsStatus[:min(len(js.Status.ReplicatedJobsStatus), maxCachedReplicatedJobs)] {
		rj.Name = cut(rj.Name, validation.DNS1123LabelMaxLength)
		// Torus restarts whole worlds, never one Job: the per-Job counts
		// (up to 1,024 each) are not its to keep.
		rj.JobRestarts, rj.JobRestartsCountTowardsMax = nil, nil
		out.Status.ReplicatedJobsStatus = append(out.Status.ReplicatedJobsStatus, rj)
	}
	for _, c := range js.Status.Conditions[:min(len(js.Status.Conditions), maxCachedConditions)] {
		c.Type, c.Reason = cut(c.Type, maxCachedConditionReason), cut(c.Reason, maxCachedConditionReason)
		c.Message = cut(c.Message, maxCachedConditionMessage)
		out.Status.Conditions = append(out.Status.Conditions, c)
	}
	return out, nil
}
