package controller

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/operator/fairqueue"
	"github.com/torus-mpi/torus/operator/metacreate"
	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/operator/upstream"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// runtimeRefKey indexes TrainJobs by the runtime they refer to, so a runtime
// change reaches the jobs waiting for it.
const runtimeRefKey = "spec.runtimeRef"

// DefaultMaxConcurrentReconciles is as many TrainJobs as a burst of
// submissions brings at once, so that a busy API server has their creates
// in flight together rather than a few at a time behind them: at 10,000
// TrainJobs from 32 creators it cost the API server the same CPU per job
// as the same objects created with no controller (bench/README.md).
const DefaultMaxConcurrentReconciles = 32

// DefaultJobSetReportTimeout is long against the JobSet controller's usual
// milliseconds, so that a slow or busy one is not reported as missing.
const DefaultJobSetReportTimeout = 2 * time.Minute

// Options configure the controllers.
type Options struct {
	// ClusterDomain is the cluster's DNS domain, for Hydra's search path.
	ClusterDomain string
	// LaunchImage is the image agent jobs take Torus's launch agent from
	// (children.BuildOptions.LaunchImage).
	LaunchImage string
	// LauncherAfterWorkers: children.BuildOptions.LauncherAfterWorkers.
	LauncherAfterWorkers bool
	// LaunchAgentDelivery: children.BuildOptions.LaunchAgentDelivery.
	LaunchAgentDelivery string
	// KueueTrainJobIntegration is true when Kueue's native TrainJob
	// integration admits TrainJobs (through spec.suspend and
	// runtimePatches). By default Kueue admits MPI jobs through its JobSet
	// integration, which takes Intel MPI and MPICH jobs as well.
	KueueTrainJobIntegration bool
	// MaxConcurrentReconciles is the number of TrainJobs reconciled at once.
	MaxConcurrentReconciles int
	// JobSetReportTimeout is how long a JobSet may go without its
	// controller's first status before its TrainJob reports
	// Created=Unknown; zero means DefaultJobSetReportTimeout.
	JobSetReportTimeout time.Duration
	// MaxNodes is the largest numNodes a job may have (zero:
	// mpi.DefaultMaxNodes); larger jobs get Created=False.
	MaxNodes int32
	// SSHKeyAlgorithm is the type of jobs' SSH keys where neither a job
	// nor its runtime chooses one (zero: mpi.DefaultKeyAlgorithm).
	SSHKeyAlgorithm mpi.KeyAlgorithm
	// IgnorePodCreationFailures leaves out the watch on the Job
	// controller's FailedCreate events (pods a quota, LimitRange or Pod
	// Security refused): jobs then wait without saying why.
	IgnorePodCreationFailures bool
	// Upstream reconciles the TrainJobs that are not MPI as upstream
	// Trainer does (upstream.New); nil leaves them Created=False.
	Upstream *upstream.Framework
	// ProofKeys are the keys of the stamps by which Torus recognises the
	// children it made (proofs): the operator keeps them in a Secret of its
	// namespace, so that every replica and every restart recognises the
	// same children. No current key: a random key of this process, the
	// same for every manager it starts.
	ProofKeys ProofKeys
	// Metrics to record into; nil registers a new set.
	Metrics *Metrics
	// Clock, for tests; nil means the real clock.
	Clock clock.PassiveClock
}

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
		// Torus never reads managedFields: it creates, updates and
		// merge-patches, and an update without them keeps the server's. A
		// heap profile at 1,000 jobs (hack/bench -pprof) showed them as
		// 6-8 MB of a 48-54 MB in-use heap, mostly the JobSets'.
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
	out := &corev1.Secret{TypeMeta: s.TypeMeta, ObjectMeta: keptMetadata(&s.ObjectMeta, annotationJobSetRestarts, annotationProof), Type: s.Type, Immutable: s.Immutable}
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
	annotationWorkersReady   = keptAnnotation{api.AnnotationWorkersReady, 256}
	// Multus's status lists each attached network's interface, addresses
	// and device: a few hundred bytes a network.
	annotationNetworkStatus = keptAnnotation{mpi.MultusNetworkStatus, 32 << 10}
)

// Bounds on the lists of a cached pod that its writer chooses the length
// of: a job's pods have a few containers and ports each.
const (
	maxCachedContainers = 16
	maxCachedPorts      = 8
	maxCachedImage      = 512
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
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			out[i].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: q}
		}
		// Where the job's sshd configuration is, for the fixes that name
		// it; which container waits for the workers (markWorkersReady).
		for _, m := range c.VolumeMounts {
			if m.Name == mpi.SSHVolume || m.Name == mpi.PodInfoVolume {
				out[i].VolumeMounts = append(out[i].VolumeMounts, m)
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

// jobSetCacheTransform keeps of a JobSet what Torus reads from the cache:
// its metadata (without managedFields), spec.suspend, the replicated jobs'
// names and counts, and its status. The pod templates go: Torus renders the
// desired JobSet afresh on every reconcile, compares it with the cached one
// by the spec-hash annotation, and an update sends the desired spec whole.
// At 1,000 jobs of 8 workers the templates are 11 MB of a 40 MB live heap
// and 26 MiB of a 117 MiB peak RSS (hack/bench -pprof: heap profile and
// runtime.MemStats; VmHWM).
// Code that needs a JobSet's templates must read it from the API server.
//
// Every other kind only loses its managedFields.
func jobSetCacheTransform(in any) (any, error) {
	in, err := cache.TransformStripManagedFields()(in)
	if err != nil {
		return nil, err
	}
	if js, ok := in.(*jobsetv1alpha2.JobSet); ok {
		for i := range js.Spec.ReplicatedJobs {
			js.Spec.ReplicatedJobs[i].Template = batchv1.JobTemplateSpec{}
		}
	}
	return in, nil
}

// SetupControllers registers Torus's controllers with a manager.
func SetupControllers(mgr ctrl.Manager, opts Options) error {
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = mpi.DefaultClusterDomain
	}
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if opts.JobSetReportTimeout == 0 {
		opts.JobSetReportTimeout = DefaultJobSetReportTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxNodes == 0 {
		opts.MaxNodes = mpi.DefaultMaxNodes
	}
	if len(opts.ProofKeys.Current) == 0 {
		opts.ProofKeys = processProofKeys()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
		if err := opts.Metrics.Register(); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
		if err := register(newJobsCollector(mgr.GetCache())); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &trainer.TrainJob{}, runtimeRefKey, func(o client.Object) []string {
		tj := o.(*trainer.TrainJob)
		return []string{trainjob.RuntimeKey(trainjob.RuntimeKind(tj), tj.Namespace, tj.Spec.RuntimeRef.Name)}
	}); err != nil {
		return fmt.Errorf("indexing TrainJobs by runtime: %w", err)
	}
	r := &TrainJobReconciler{
		client:       metacreate.Wrap(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient()),
		apiReader:    mgr.GetAPIReader(),
		recorder:     mgr.GetEventRecorder("torus-operator"),
		clock:        opts.Clock,
		metrics:      opts.Metrics,
		maxNodes:     opts.MaxNodes,
		keyAlgorithm: opts.SSHKeyAlgorithm,
		proofs:       newProofs(opts.ProofKeys),
		build:        children.BuildOptions{ClusterDomain: opts.ClusterDomain, LaunchImage: opts.LaunchImage, LauncherAfterWorkers: opts.LauncherAfterWorkers, LaunchAgentDelivery: opts.LaunchAgentDelivery, KueueJobSets: !opts.KueueTrainJobIntegration},

		jobSetReportTimeout: opts.JobSetReportTimeout,
	}
	kueueServed, err := startup.Served(mgr.GetRESTMapper(), kueue.SchemeGroupVersion.WithKind("Workload").GroupKind(), kueue.SchemeGroupVersion.Version)
	if err != nil {
		return err
	}
	if r.build.SCCs, err = startup.Served(mgr.GetRESTMapper(), startup.SCCKind); err != nil {
		return err
	}
	nadServed, err := startup.Served(mgr.GetRESTMapper(), nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinition").GroupKind(), nadv1.SchemeGroupVersion.Version)
	if err != nil {
		return err
	}
	if err := setupProfileController(mgr, nadServed); err != nil {
		return fmt.Errorf("setting up the MPINetworkProfile controller: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if opts.Upstream != nil {
		r.upstream = opts.Upstream
		b = opts.Upstream.Watch(b, mgr)
	}
	if kueueServed {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, workloadOwnerKey, indexWorkloadOwner); err != nil {
			return fmt.Errorf("indexing Kueue workloads: %w", err)
		}
		b = b.Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(workloadToTrainJob))
		r.kueue.Store(true)
	}
	if !opts.IgnorePodCreationFailures {
		b = b.Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(eventToTrainJob))
		r.podCreationFailures = true
	}
	// Jobs queued before Kueue was installed are looked at again once it is.
	kick := make(chan event.GenericEvent)
	if !kueueServed {
		b = b.WatchesRawSource(source.Channel(kick, &handler.EnqueueRequestForObject{}))
	}
	c, err := b.
		Named("trainjob").
		For(&trainer.TrainJob{}).
		Owns(&jobsetv1alpha2.JobSet{}, builder.WithPredicates(r.expectedCreate(childJobSet))).
		// Typed, not OnlyMetadata: upstream's MPI and Flux plugins watch
		// Secrets as whole objects, and one informer serves both, where a
		// metadata watch beside theirs had the API server send and convert
		// every key Secret event twice.
		Owns(&corev1.Secret{}, builder.WithPredicates(r.expectedCreate(childSecret))).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Pod{}, podEvents(podEventsDelay)).
		// A pod counts once its Job is in the cache: the Job's creation
		// brings the job back in case its pods' events came first.
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(jobToTrainJob), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&trainer.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.runtimeToTrainJobs(trainer.ClusterTrainingRuntimeKind))).
		Watches(&trainer.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.runtimeToTrainJobs(trainer.TrainingRuntimeKind))).
		// Namespaces take turns: one tenant's flood of events waits behind
		// its own work, not everyone's.
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, NewQueue: fairqueue.NewRateLimiting}).
		Build(r)
	if err != nil || kueueServed {
		return err
	}
	// Kueue installed after the operator started: watch its workloads from
	// then on (the controller takes watches while it runs), rather than
	// leave queued jobs without a word until the operator restarts.
	workloads := kueue.SchemeGroupVersion.WithKind("Workload")
	return mgr.Add(startup.WhenServed(mgr.GetRESTMapper(), workloads, optionalAPIPollInterval, nil, mgr.GetLogger().WithName("kueue"), func(ctx context.Context) error {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, workloadOwnerKey, indexWorkloadOwner); err != nil {
			return fmt.Errorf("indexing Kueue workloads: %w", err)
		}
		if err := c.Watch(source.Kind[client.Object](mgr.GetCache(), &kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(workloadToTrainJob))); err != nil {
			return fmt.Errorf("watching Kueue workloads: %w", err)
		}
		r.kueue.Store(true)
		var queued trainer.TrainJobList
		if err := mgr.GetClient().List(ctx, &queued, client.HasLabels{mpi.KueueQueueLabel}); err != nil {
			return fmt.Errorf("listing queued TrainJobs: %w", err)
		}
		go func() {
			for i := range queued.Items {
				select {
				case kick <- event.GenericEvent{Object: &queued.Items[i]}:
				case <-ctx.Done():
					return
				}
			}
		}()
		return nil
	}))
}

// processProofKeys are a proof key of this process alone.
var processProofKeys = sync.OnceValue(func() ProofKeys {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read does not fail
	return ProofKeys{Current: key, Since: time.Now()}
})

// optionalAPIPollInterval is how often an operator started without Kueue (or
// Multus) looks whether it was installed since.
const optionalAPIPollInterval = 30 * time.Second

// podToTrainJob maps a job's pod to its TrainJob through the job-name label.
func podToTrainJob(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[api.LabelJobName]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// podEventsDelay is how long a change of a job's pod waits before the job
// is reconciled: the changes of every pod of a job starting or ending
// within it are one reconcile, where each was one, with every pod of the
// job read from the cache each time. A person reading the job's status,
// or a failure it reports, waits no longer than that.
const podEventsDelay = 200 * time.Millisecond

// podEvents enqueues the TrainJob of a pod (podToTrainJob) delay after the
// pod changed, but at once for a pod created behind Torus's scheduling
// gate, which waits for Torus alone to start.
func podEvents(delay time.Duration) handler.Funcs {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], after time.Duration) {
		for _, r := range podToTrainJob(ctx, o) {
			q.AddAfter(r, after)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			after := delay
			if p, ok := e.Object.(*corev1.Pod); ok && hasGate(p, api.SchedulingGateSSHKeys) {
				after = 0
			}
			enqueue(ctx, e.Object, q, after)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.ObjectNew, q, delay)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, delay)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, delay)
		},
	}
}

// jobToTrainJob maps a JobSet's Job to the TrainJob of the same name as
// the JobSet (mpi.JobSetName).
func jobToTrainJob(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// eventToTrainJob maps the Job controller's FailedCreate event about a
// JobSet's child Job to its TrainJob.
func eventToTrainJob(_ context.Context, o client.Object) []reconcile.Request {
	e, ok := o.(*corev1.Event)
	if !ok {
		return nil
	}
	name := diagnosis.TrainJobOfJob(e.InvolvedObject.Name)
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: e.Namespace, Name: name}}}
}

func (r *TrainJobReconciler) runtimeToTrainJobs(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var jobs trainer.TrainJobList
		opts := []client.ListOption{client.MatchingFields{runtimeRefKey: trainjob.RuntimeKey(kind, o.GetNamespace(), o.GetName())}}
		if kind == trainer.TrainingRuntimeKind {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := r.client.List(ctx, &jobs, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing TrainJobs of a runtime", "runtime", o.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(jobs.Items))
		for i := range jobs.Items {
			// Running jobs do not change with their runtime; only jobs
			// that are waiting for it do.
			if trainjob.Finished(&jobs.Items[i]) {
				continue
			}
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&jobs.Items[i])})
		}
		return reqs
	}
}
