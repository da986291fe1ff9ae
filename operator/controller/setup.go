package controller

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
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
	"github.com/torus-mpi/torus/operator/fairqueue"
	"github.com/torus-mpi/torus/operator/metacreate"
	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/operator/upstream"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// runtimeRefKey indexes TrainJobs by the runtime they refer to, so a runtime
// change reaches the jobs waiting for it.
const runtimeRefKey = "spec.runtimeRef"

// DefaultMaxConcurrentReconciles is as many TrainJobs as a burst of
// submissions brings at once, so that a busy API server has their creates
// in flight together rather than a few at a time behind them: at 10,000
// TrainJobs from 32 creators it cost the API server the same CPU per job
// as the same objects created with no controller (test/perf/README.md).
const DefaultMaxConcurrentReconciles = 32

// DefaultJobSetReportTimeout is long against the JobSet controller's usual
// milliseconds, so that a slow or busy one is not reported as missing.
const DefaultJobSetReportTimeout = 2 * time.Minute

// Options are what SetupControllers needs: the operator's settings for the
// jobs it runs, and what the process gives the controllers.
type Options struct {
	Settings
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
	// StatusServer says where the jobs' pods report their progress
	// (statusserver.Locator.Current); nil, or nil answers, wire none.
	StatusServer func() *trainerstatus.Server
	// Webhooks registers the pods' admission (PodGatePath) on the
	// manager's webhook server.
	Webhooks bool
}

// SetupControllers registers Torus's controllers with a manager.
func SetupControllers(mgr ctrl.Manager, opts Options) error {
	if err := opts.Settings.Validate(); err != nil {
		return err
	}
	opts.Settings = opts.Settings.withDefaults()
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
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
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podJobKey, indexPodJob); err != nil {
		return fmt.Errorf("indexing pods by MPI job: %w", err)
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
		build:        opts.buildOptions(),
		statusServer: opts.StatusServer,

		jobSetReportTimeout: opts.JobSetReportTimeout,
	}
	clientset, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("a client for pods' logs: %w", err)
	}
	r.pods = clientset.CoreV1()
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
	if opts.Webhooks {
		registerPodGate(mgr, r)
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
		Owns(&jobsetv1alpha2.JobSet{}, builder.WithPredicates(r.expectedCreate(childJobSet), r.jobSetReported())).
		// Typed, not OnlyMetadata: upstream's MPI and Flux plugins watch
		// Secrets as whole objects, and one informer serves both, where a
		// metadata watch beside theirs had the API server send and convert
		// every key Secret event twice.
		Owns(&corev1.Secret{}, builder.WithPredicates(r.expectedCreate(childSecret))).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Pod{}, podEvents(podEventsDelay, r.memory.costs.spacing)).
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

// podToTrainJob maps a job's pod to its TrainJob through the job-name label:
// the job whose reconcile reads the pod (indexPodJob).
func podToTrainJob(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, name := range indexPodJob(o) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}})
	}
	return reqs
}

// podJobKey indexes the cached pods by the MPI job whose label they wear.
// A reconcile reads its job's pods from the index: matching the labels of
// every pod of the namespace instead read every job's pods on each
// reconcile of one, many thousands of times during a burst of jobs in one
// namespace, and matched each pod of a large job again on each of its
// pods' changes.
const podJobKey = "torus.pod.job"

// indexPodJob is a pod's podJobKey: the job its label names, if any.
func indexPodJob(o client.Object) []string {
	if name := o.GetLabels()[api.LabelJobName]; name != "" {
		return []string{name}
	}
	return nil
}

// podEventsDelay is how long a change of a job's pod waits before the job
// is reconciled: the changes of every pod of a job starting or ending
// within it are one reconcile, where each was one, with every pod of the
// job read from the cache each time. A person reading the job's status,
// or a failure it reports, waits no longer than that, or than a large
// job's spacing (reconcileCosts).
const podEventsDelay = 200 * time.Millisecond

// podEvents enqueues the TrainJob of a pod (podToTrainJob) after the pod
// changed, as long after as spacing says for its job and the kind of
// change (routinePodChange; delay when spacing is nil), but at once for a
// pod created behind Torus's scheduling gate, which waits for Torus alone
// to start.
func podEvents(delay time.Duration, spacing func(job client.ObjectKey, routine bool) time.Duration) handler.Funcs {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], after time.Duration, routine bool) {
		for _, r := range podToTrainJob(ctx, o) {
			if after > 0 && spacing != nil {
				after = spacing(r.NamespacedName, routine)
			}
			q.AddAfter(r, after)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			after := delay
			p, ok := e.Object.(*corev1.Pod)
			if ok && hasGate(p, api.SchedulingGateSSHKeys) {
				after = 0
			}
			enqueue(ctx, e.Object, q, after, ok && routinePodChange(p))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			p, ok := e.ObjectNew.(*corev1.Pod)
			enqueue(ctx, e.ObjectNew, q, delay, ok && routinePodChange(p))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, delay, false)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, delay, false)
		},
	}
}

// routinePodChange reports whether a pod, as it is after a change, is a
// worker on the way every worker of a starting or running job takes:
// pending or running, not being deleted, never restarted, and with no
// problem the diagnosis names (diagnosis.HasProblem). What the job's
// status says of such pods is a count; any other pod (the launcher, one
// failing, ending, unschedulable) may need words in it.
func routinePodChange(p *corev1.Pod) bool {
	if p.Labels[api.LabelRole] != api.RoleWorker || !p.DeletionTimestamp.IsZero() ||
		p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.RestartCount > 0 {
				return false
			}
		}
	}
	return !diagnosis.HasProblem(p)
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
