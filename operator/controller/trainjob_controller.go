package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/diagnosis"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// TrainJobReconciler turns MPI TrainJobs into JobSets with per-job SSH keys
// and a hostfile, and reports their progress on the TrainJob.
type TrainJobReconciler struct {
	client client.Client
	// apiReader reads past the cache: for the SSH Secret's keys, which the
	// cache does not keep.
	apiReader client.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	metrics   *Metrics
	build     children.BuildOptions
	// statusServer is where the pods report progress (Options.StatusServer).
	statusServer func() *trainerstatus.Server
	// maxNodes is the largest numNodes a job may have.
	maxNodes int32
	// keyAlgorithm is the type of the keys of jobs that choose none.
	keyAlgorithm mpi.KeyAlgorithm
	// kueue is true once Kueue's Workload API is served (at start, or
	// when Kueue is installed later), so waiting jobs can say why they wait.
	kueue atomic.Bool
	// podCreationFailures: the Job controller's FailedCreate events are
	// watched and explain jobs whose pods were refused.
	podCreationFailures bool
	// memory is what the reconciler keeps of each job between reconciles.
	memory memory
	// jobSetReportTimeout is how long a JobSet may go without its
	// controller's first status before the job says so.
	jobSetReportTimeout time.Duration
	// jobSetReports is when the JobSet controller last reported on a
	// JobSet Torus made: a job it has not come to is behind a busy
	// controller, not one that stopped, while it reports on others.
	jobSetReports reportClock
	// upstream reconciles the TrainJobs that are not MPI, as upstream
	// Trainer does; nil leaves them Created=False.
	upstream reconcile.Reconciler
	// proofs stamp the children Torus makes and recognise them.
	proofs proofs
	// pods reads a running launcher's output (stallPhase); nil reads none.
	pods corev1client.PodsGetter
}

// scope is the state of one reconcile.
type scope struct {
	// rt is the job's runtime, or rtErr why it cannot be read.
	rt    *mpi.Runtime
	rtErr error
	// frozen: the job cannot be built afresh but has started, so it goes
	// on as it started (resolvePhase): its children are left as they are.
	frozen bool
	// stop ends the phases of this reconcile: the job is blocked, was just
	// stopped (what is left of it goes once the failure is saved), or
	// waits for the cache.
	stop bool
	// keysReady: the keys of the job's current run are Torus's own, so its
	// pods may start (ungatePods).
	keysReady bool
	// admittedNow: Kueue admitted the job in this reconcile; evictedNow:
	// Kueue evicted it, admitted, in this one.
	admittedNow, evictedNow bool
	// refused are the job's pods the API server refused to create.
	refused []diagnosis.Finding
	// sandboxes are the job's pods whose sandbox (their network) the
	// kubelet cannot set up.
	sandboxes []diagnosis.Finding
	tj        *trainer.TrainJob
	job       *mpi.Job
	// jobSet is the job's JobSet as the cache holds it, without its pod
	// templates (jobSetCacheTransform), or as Torus just wrote it.
	jobSet *jobsetv1alpha2.JobSet
	pods   []corev1.Pod
	// findings is the diagnosis of pods, once the status made it
	// (diagnosed): the record of restarts reads it too, and a large job's
	// pods are many.
	findings  []diagnosis.Finding
	diagnosed bool
	created   bool
	// waiting says why Kueue has not admitted the job yet.
	waiting string
	// workload is the Kueue Workload of a queued job's JobSet, as the
	// cache holds it (workloadPhase); nil when there is none.
	workload *kueue.Workload
	now      time.Time
	events   []queuedEvent
	// awaitCache is set when a child this reconciler created is not in the
	// cache yet (see memory).
	awaitCache bool
	// recheck is the soonest any phase asked to look again though no event
	// may come (lookAgain).
	recheck time.Duration
}

// phase is one step of a reconcile of a job that has not ended. It may end
// the reconcile there (s.stop) and ask to look at the job again after a
// while (s.lookAgain); requeueAfter alone decides when.
type phase func(ctx context.Context, s *scope) error

// lookAgain asks to reconcile the job again within d though no event may
// come; the soonest ask wins. Zero or less asks nothing.
func (s *scope) lookAgain(d time.Duration) {
	if d > 0 && (s.recheck <= 0 || d < s.recheck) {
		s.recheck = d
	}
}

// requeueAfter is when to reconcile the job again though no event may
// come: the soonest any phase asked for, and expectationTTL while a child
// this reconcile waits for has not reached the cache (it may have gone
// before it was seen).
func (s *scope) requeueAfter() time.Duration {
	d := s.recheck
	if s.awaitCache && (d <= 0 || expectationTTL < d) {
		d = expectationTTL
	}
	return d
}

type queuedEvent struct {
	eventType, reason, note string
	args                    []any
}

// event queues an event; events are emitted after the status write
// succeeds, so that they never describe a state the API does not show.
func (s *scope) event(eventType, reason, note string, args ...any) {
	s.events = append(s.events, queuedEvent{eventType, reason, note, args})
}

// willBeSuspended reports whether the JobSet is, or is about to be created,
// suspended.
func (s *scope) willBeSuspended(desired *jobsetv1alpha2.JobSet) bool {
	if ptr.Deref(s.tj.Spec.Suspend, false) {
		return true
	}
	if s.jobSet != nil {
		return ptr.Deref(s.jobSet.Spec.Suspend, false)
	}
	return ptr.Deref(desired.Spec.Suspend, false)
}

// wantsKeys reports whether the job's current run needs its keys now: its
// JobSet runs after this reconcile (willRun), or Kueue has reserved quota
// for the queued job and is about to resume its JobSet itself. Made at the
// reservation, the keys exist before the Job controller creates the first
// run's pods, so that the webhook admits those pods without Torus's gate
// (podGate) rather than each waiting for an ungating write.
func (s *scope) wantsKeys(desired *jobsetv1alpha2.JobSet, queued bool) bool {
	if s.willRun(desired, queued) {
		return true
	}
	return queued && !ptr.Deref(s.tj.Spec.Suspend, false) && quotaReserved(s.workload)
}

// willRun reports whether the JobSet runs after this reconcile: it runs, or
// is created running, or Torus resumes it now; not while a job outside
// Kueue backs off after a restart (restartHoldOutsideKueue). Torus lifts
// only its own suspension: a queued job's JobSet is Kueue's to resume when it admits it,
// and so is one Kueue suspended although the TrainJob names no queue (a
// default LocalQueue, manageJobsWithoutQueueName).
func (s *scope) willRun(desired *jobsetv1alpha2.JobSet, queued bool) bool {
	switch {
	case ptr.Deref(s.tj.Spec.Suspend, false):
		return false
	case s.jobSet == nil:
		return !ptr.Deref(desired.Spec.Suspend, false)
	case s.restartHoldOutsideKueue(queued) > 0:
		return false
	case !ptr.Deref(s.jobSet.Spec.Suspend, false):
		return true
	}
	return !queued && s.jobSet.Annotations[api.AnnotationSuspendedByTorus] == "true"
}

// managedByTorus: Torus stands in for the built-in Trainer controller, so
// it reconciles the TrainJobs that controller would (managedBy unset or
// Trainer's own value), and leaves the rest (e.g. MultiKueue) alone.
func managedByTorus(tj *trainer.TrainJob) bool {
	m := ptr.Deref(tj.Spec.ManagedBy, mpi.TrainerManagedBy)
	return m == mpi.TrainerManagedBy
}

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// Reconcile implements reconcile.Reconciler.
func (r *TrainJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var tj trainer.TrainJob
	if err := r.client.Get(ctx, req.NamespacedName, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !managedByTorus(&tj) {
		return ctrl.Result{}, nil
	}
	start := r.clock.Now()
	defer func() { r.memory.costs.took(req.NamespacedName, r.clock.Since(start)) }()
	rt, rtErr := trainjob.GetRuntime(ctx, r.client, &tj)
	if r.upstream != nil {
		other, err := r.upstreams(ctx, &tj, rt, rtErr)
		if err != nil {
			return ctrl.Result{}, err
		}
		if other {
			return r.upstream.Reconcile(ctx, req)
		}
	}
	if !tj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("trainJob", klog.KObj(&tj))
	ctx = ctrl.LoggerInto(ctx, log)
	if r.memory.statusWrites.behind(req.NamespacedName, tj.ResourceVersion) {
		// The cache still holds the job as it was before our last status
		// patch: the children's watch events often come first. Working
		// from it would send that patch, and its events, again. The
		// patch's own watch event brings the job back once the cache has
		// it.
		log.V(3).Info("Cache is behind the last status write; waiting for it")
		return ctrl.Result{}, nil
	}
	log.V(3).Info("Reconciling")

	s := &scope{tj: tj.DeepCopy(), rt: rt, rtErr: rtErr, now: r.clock.Now()}
	err := r.reconcile(ctx, s)
	if statusErr := r.writeStatus(ctx, &tj, s); statusErr != nil {
		err = errors.Join(err, statusErr)
	} else {
		for _, e := range s.events {
			r.recorder.Eventf(s.tj, nil, e.eventType, e.reason, "Reconcile", e.note, e.args...)
		}
	}
	if err != nil {
		r.metrics.ReconcileErrors.WithLabelValues(tj.Namespace).Inc()
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeueAfter()}, nil
}

// upstreams reports whether a TrainJob is upstream's to reconcile. A job
// that has started keeps the path it started on until it ends, whatever its
// runtime becomes meanwhile: the JobSet Torus made records the job
// (api.AnnotationJob), and upstream's does not. Handing a running job to the
// other path would have that path rewrite or abandon children it did not
// make. A job that has not started goes by its runtime (notMPI).
func (r *TrainJobReconciler) upstreams(ctx context.Context, tj *trainer.TrainJob, rt *mpi.Runtime, rtErr error) (bool, error) {
	var js jobsetv1alpha2.JobSet
	switch err := r.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: mpi.JobSetName(tj.Name)}, &js); {
	case err == nil && metav1.IsControlledBy(&js, tj):
		// Which path made it, not whether Torus may use it (proofs): a
		// JobSet that records an MPI job is never handed to upstream's
		// framework, which would make its own keys beside Torus's.
		_, mpiJob := js.Annotations[api.AnnotationJob]
		return !mpiJob, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("getting JobSet: %w", err)
	}
	return notMPI(tj, rt, rtErr)
}

// notMPI reports whether a TrainJob is upstream's to reconcile: its runtime
// has no mlPolicy.mpi. A job whose runtime cannot be found is Torus's when
// Torus's webhook labelled it an MPI job (its runtime was deleted since),
// and upstream's otherwise, which reports missing runtimes its own way.
func notMPI(tj *trainer.TrainJob, rt *mpi.Runtime, err error) (bool, error) {
	if refErr := (*trainjob.RuntimeRefError)(nil); errors.As(err, &refErr) {
		_, labelled := tj.Labels[api.LabelImplementation]
		return !labelled, nil
	}
	if err != nil {
		return false, err
	}
	return !rt.IsMPI(), nil
}

// blocked is why a job cannot be built now: its Created=False condition,
// and when to look again without an event.
type blocked struct {
	reason, message string
	recheck         time.Duration
	// networks: the job's networks are not ready (NetworksReady too).
	networks bool
}

// resolve makes the job from the TrainJob, its runtime and its network
// profile, or says what blocks it.
func (r *TrainJobReconciler) resolve(ctx context.Context, s *scope, rt *mpi.Runtime, err error) (*mpi.Job, *blocked, error) {
	if refErr := (*trainjob.RuntimeRefError)(nil); errors.As(err, &refErr) {
		// The runtime watch brings the job back when the runtime appears.
		return nil, &blocked{reason: trainjob.ReasonRuntimeNotFound, message: refErr.Error()}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if !rt.IsMPI() {
		return nil, &blocked{reason: trainjob.ReasonRuntimeNotSupported,
			message: fmt.Sprintf("Torus runs MPI runtimes only: %s %q has no mlPolicy.mpi, so no JobSet was created", rt.Kind, rt.Name)}, nil
	}
	job, err := mpi.ResolveJob(s.tj, rt)
	if err != nil {
		return nil, &blocked{reason: trainjob.ReasonInvalidJob, message: err.Error()}, nil
	}
	// Again here: the webhook may have been bypassed (not installed, or
	// failurePolicy Ignore) or configured otherwise.
	if err := job.CheckSize(r.maxNodes); err != nil {
		return nil, &blocked{reason: trainjob.ReasonJobTooLarge, message: err.Error()}, nil
	}
	s.job = job
	plan, problems, err := r.planNetwork(ctx, s, rt)
	if err != nil {
		return nil, nil, err
	}
	if len(problems) > 0 {
		// The job may not start: its pods would hang without their
		// networks. Profiles, NADs and device plugins change without
		// events here, so look again periodically.
		return nil, &blocked{reason: trainjob.ReasonNetworkNotReady, message: strings.Join(problems, "; "), recheck: networkRecheck, networks: true}, nil
	}
	job.Network = plan
	return job, nil, nil
}

// startedJob is the job as it started, recorded on the JobSet Torus made
// for it; nil when it has not started (no such JobSet) or the record cannot
// be read.
func (r *TrainJobReconciler) startedJob(s *scope) *mpi.Job {
	if s.jobSet == nil || !r.proofs.made(childJobSet, s.jobSet, s.tj) {
		return nil
	}
	job, ok := mpi.DecodeJob(s.jobSet.Annotations[api.AnnotationJob])
	if !ok {
		return nil
	}
	return job
}

// reconcile brings one MPI job a step further. A job that has not ended
// goes through phases (progress), any of which may end the reconcile
// early; a job that has ended, or ends in this reconcile, has what is left
// of it cleaned up (finish).
func (r *TrainJobReconciler) reconcile(ctx context.Context, s *scope) error {
	if err := r.observeJobSet(ctx, s); err != nil {
		return err
	}
	if wrote, err := r.reprove(ctx, s); wrote || err != nil {
		s.awaitCache = true
		return err
	}
	if trainjob.Finished(s.tj) {
		if s.jobSet != nil {
			// JobSet stops the remaining jobs after the TrainJob finished.
			s.tj.Status.JobsStatus = jobsStatus(s.jobSet)
		}
	} else {
		if err := r.progress(ctx, s); s.stop || err != nil || !trainjob.Finished(s.tj) {
			return err
		}
		// A job that ended has nothing left to look at again for.
		s.recheck = 0
	}
	return r.finish(ctx, s)
}

// progress runs the phases of a job that has not ended, in order, until
// one stops: resolve it, hold it to its deadline, make its children,
// follow its admission and its pods into its status, and fail it if it
// cannot start.
func (r *TrainJobReconciler) progress(ctx context.Context, s *scope) error {
	for _, p := range []phase{
		r.resolvePhase, r.deadlinePhase, r.workloadPhase, r.childrenPhase, r.admissionPhase, r.podsPhase,
		r.gatePhase, r.markWorkersReady, r.statusPhase, r.startPhase, r.stallPhase,
	} {
		if err := p(ctx, s); err != nil || s.stop {
			return err
		}
	}
	return nil
}

// observeJobSet reads the job's JobSet from the cache, if it has one.
func (r *TrainJobReconciler) observeJobSet(ctx context.Context, s *scope) error {
	var js jobsetv1alpha2.JobSet
	switch err := r.client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: mpi.JobSetName(s.tj.Name)}, &js); {
	case err == nil:
		s.jobSet = &js
		r.memory.created.seen(childJobSet, client.ObjectKeyFromObject(s.tj))
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting JobSet: %w", err)
	}
	return nil
}

// resolvePhase sets s.job: the job resolved afresh from its TrainJob,
// runtime and network profile, or, when that is blocked but the job has
// started, the job as it started (s.frozen: its deadline, status and end
// are still Torus's; its children are left as they are). A job blocked
// before it started stops here with s.job nil and Created=False, and says
// when to look again.
func (r *TrainJobReconciler) resolvePhase(ctx context.Context, s *scope) error {
	job, block, err := r.resolve(ctx, s, s.rt, s.rtErr)
	if err != nil {
		return err
	}
	started := r.startedJob(s)
	switch {
	case block != nil && started == nil:
		s.job = nil
		s.setCondition(trainjob.ConditionCreated, metav1.ConditionFalse, block.reason, block.message)
		if block.networks && s.setCondition(trainjob.ConditionNetworksReady, metav1.ConditionFalse, block.reason, block.message) {
			s.event(corev1.EventTypeWarning, block.reason, "%s", block.message)
		}
		s.stop = true
		s.lookAgain(block.recheck)
		return nil
	case block != nil:
		ctrl.LoggerFrom(ctx).V(1).Info("Job cannot be built afresh; tracking it as it started", "reason", block.reason, "message", block.message)
		s.job, s.frozen = started, true
		return nil
	case started != nil:
		// The pods of a JobSet an earlier Torus made have the SSH
		// directory it laid out: their keys come with an sshd
		// configuration those pods pass (a restart replaces the keys).
		job.SSH.StrictModes = started.SSH.StrictModes
	}
	s.job = job
	return nil
}

// childrenPhase builds the job's JobSet and makes or updates its children,
// unless the job is frozen; it stops when the job cannot be built or a
// child conflicts.
func (r *TrainJobReconciler) childrenPhase(ctx context.Context, s *scope) error {
	if s.frozen {
		return nil
	}
	build := r.build
	build.Nodes = r.nodeLister(ctx)
	if r.statusServer != nil {
		build.StatusServer = r.statusServer()
	}
	desired, err := children.BuildJobSet(s.tj, s.rt, s.job, build)
	if err != nil {
		s.setCondition(trainjob.ConditionCreated, metav1.ConditionFalse, trainjob.ReasonInvalidJob, err.Error())
		s.stop = true
		return nil
	}
	key := client.ObjectKeyFromObject(s.tj)
	if err := r.ensureChildren(ctx, s, s.rt, desired); err != nil {
		if s.handleConflict(err) {
			s.stop = true
			s.lookAgain(r.memory.conflicts.conflicted(key))
			return nil
		}
		return err
	}
	r.memory.conflicts.unconflicted(key)
	if s.willBeSuspended(desired) && !s.wantsKeys(desired, r.build.Queued(s.tj)) {
		if _, err := r.deleteSSHSecret(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// workloadPhase reads the Kueue Workload of a queued job's JobSet: its
// quota reservation decides when the keys are made (wantsKeys), and its
// admission what the job waits for (admissionPhase).
func (r *TrainJobReconciler) workloadPhase(ctx context.Context, s *scope) error {
	if !r.kueue.Load() || !r.build.Queued(s.tj) || s.jobSet == nil {
		return nil
	}
	wl, err := r.getWorkload(ctx, s)
	s.workload = wl
	return err
}

// admissionPhase follows Kueue's admission of a queued job's workload. A
// JobSet created in this reconcile has none yet.
func (r *TrainJobReconciler) admissionPhase(_ context.Context, s *scope) error {
	if !r.kueue.Load() || !r.build.Queued(s.tj) || s.jobSet == nil {
		return nil
	}
	s.waiting = s.syncAdmission(s.tj.Labels[mpi.KueueQueueLabel], s.workload)
	if s.admittedNow {
		r.metrics.TimeToAdmission.WithLabelValues(s.tj.Namespace).Observe(s.now.Sub(s.tj.CreationTimestamp.Time).Seconds())
	}
	if s.evictedNow {
		r.metrics.Restarts.WithLabelValues(s.tj.Namespace, trainjob.ReasonEvicted).Inc()
	}
	return nil
}

// podsPhase reads the job's pods, and the pods the API server refused to
// create (a quota, a LimitRange, Pod Security), which only the Job
// controller's events tell.
func (r *TrainJobReconciler) podsPhase(ctx context.Context, s *scope) error {
	if s.jobSet == nil {
		s.pods = nil
		return nil
	}
	// The pods are read, never written: the cache's own copies spare a
	// deep copy of every pod of the job on every event of one of them.
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(s.tj.Namespace), client.MatchingFields{podJobKey: s.tj.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(s.tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: s.jobSet.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing the JobSet's Jobs: %w", err)
	}
	owners := make([]metav1.Object, len(jobs.Items))
	for i := range jobs.Items {
		owners[i] = &jobs.Items[i]
	}
	s.pods = trainjob.OwnPods(s.tj, s.jobSet, owners, pods.Items)
	var err error
	if s.sandboxes, err = r.sandboxFailures(ctx, s); err != nil {
		return err
	}
	if !r.podCreationFailures {
		return nil
	}
	var events corev1.EventList
	if err := r.client.List(ctx, &events, client.InNamespace(s.tj.Namespace)); err != nil {
		return fmt.Errorf("listing pod expectation failures: %w", err)
	}
	since, _ := trainjob.LastStart(s.tj, false)
	if s.jobSet.CreationTimestamp.After(since) {
		since = s.jobSet.CreationTimestamp.Time
	}
	s.refused = diagnosis.PodCreation(events.Items, s.tj.Name, since)
	return nil
}

// gatePhase lets the job's pods be scheduled once this run's keys are
// Torus's own. A frozen job made no children in this reconcile, so whether
// its keys are made is read from the cache.
func (r *TrainJobReconciler) gatePhase(ctx context.Context, s *scope) error {
	if s.frozen {
		s.keysReady = r.keysMade(ctx, s)
	}
	return r.ungatePods(ctx, s)
}

// statusPhase derives the job's status from its JobSet and pods.
func (r *TrainJobReconciler) statusPhase(_ context.Context, s *scope) error {
	r.syncStatus(s)
	return nil
}

// startPhase holds a job that has not ended to its scheduling timeout and
// checks its networks.
func (r *TrainJobReconciler) startPhase(ctx context.Context, s *scope) error {
	if trainjob.Finished(s.tj) {
		return nil
	}
	s.lookAgain(r.checkSchedulingTimeout(s))
	if trainjob.Finished(s.tj) {
		return nil
	}
	if _, err := r.syncNetworks(ctx, s); err != nil {
		return err
	}
	if s.job.Network != nil && !isTrue(s.tj, trainjob.ConditionNetworksReady) {
		// Multus's report may be late; a missing one becomes an error after
		// a grace period, with no event to wake us.
		s.lookAgain(networkStatusGracePeriod / 3)
	}
	return nil
}

// networkRecheck is how often a job blocked on its network setup looks again.
const networkRecheck = 30 * time.Second

// ensureChildren creates or updates the job's children, in the order its
// pods need them.
func (r *TrainJobReconciler) ensureChildren(ctx context.Context, s *scope, rt *mpi.Runtime, desired *jobsetv1alpha2.JobSet) error {
	// Keys (and the hostfile beside them) exist only while the job may run:
	// none while it waits suspended (for the user, or in Kueue's queue), new
	// ones each time it starts again. They are made before the JobSet may
	// start pods that mount them: before it is created running, before
	// Torus resumes it, and once Kueue reserves a queued job's quota.
	if s.wantsKeys(desired, r.build.Queued(s.tj)) {
		if _, err := r.ensureSSHSecret(ctx, s); err != nil {
			return err
		}
		s.keysReady = !s.awaitCache
	}
	// The policy comes before the pods it protects.
	if err := r.ensureNetworkPolicy(ctx, s, rt); err != nil {
		return err
	}
	return r.ensureJobSet(ctx, s, desired, r.build.Queued(s.tj))
}

// finish cleans up after a job ended: its SSH keys go unless the user asked
// to keep them. Pods stay for their logs, as the JobSet's policy says.
//
// A job Torus itself failed (its deadline passed, its networks are missing)
// has its JobSet, and so its pods, deleted here, once the failure is
// saved: deleting first could lose the failure and have the next reconcile
// start the job again.
func (r *TrainJobReconciler) finish(ctx context.Context, s *scope) error {
	if stoppedByTorus(s.tj) && s.jobSet != nil && r.proofs.made(childJobSet, s.jobSet, s.tj) && s.jobSet.DeletionTimestamp.IsZero() {
		if err := r.client.Delete(ctx, s.jobSet, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the JobSet of a stopped job: %w", err)
		}
	}
	if s.tj.Annotations[api.AnnotationKeepSSHKeys] == "true" {
		return nil
	}
	_, err := r.deleteSSHSecret(ctx, s)
	return err
}

// orderConditions puts the conditions that hold last, the job's end last
// of all, each group in its own order: the Trainer CRD's State column, in
// kubectl and OpenShift's console alike, shows the type of the last
// condition, which must then be true of the job ("Running" only while it
// runs).
func orderConditions(conds []metav1.Condition) {
	rank := func(c metav1.Condition) int {
		switch {
		case c.Status != metav1.ConditionTrue:
			return 0
		case c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed:
			return 2
		default:
			return 1
		}
	}
	sort.SliceStable(conds, func(i, j int) bool { return rank(conds[i]) < rank(conds[j]) })
}

// stoppedByTorus: the job failed because Torus stopped it, not because its
// JobSet ended.
func stoppedByTorus(tj *trainer.TrainJob) bool {
	c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed)
	return c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == trainjob.ReasonDeadlineExceeded || c.Reason == trainjob.ReasonNetworkNotReady || c.Reason == trainjob.ReasonSchedulingTimeout ||
			c.Reason == trainjob.ReasonStalled)
}

// progressInterval spaces a job's status patches that only count its
// progress (workers ready, the JobSet's counts) from the job's last status
// patch of any kind. A job's start changes those counts with its pods, over
// seconds for a few workers and minutes for thousands, and in a burst of
// jobs on a busy control plane; each patch is a write of the TrainJob,
// which the API server validates against Trainer's schema, and a watch
// event for every TrainJob watcher (`kubectl get trainjobs -w`, the
// dashboard, the operator's own cache). A change of condition, reason or
// anything else is written at once, with the counts as they are then.
const progressInterval = 5 * time.Second

// writeStatus sends one status patch, only when the status changed; one
// that only counts progress waits until progressInterval has passed since
// the job's last status patch, and the reconcile comes back then.
func (r *TrainJobReconciler) writeStatus(ctx context.Context, orig *trainer.TrainJob, s *scope) error {
	orderConditions(s.tj.Status.Conditions)
	if equality.Semantic.DeepEqual(orig.Status, s.tj.Status) {
		return nil
	}
	key := client.ObjectKeyFromObject(orig)
	if len(s.events) == 0 && progressOnly(&orig.Status, &s.tj.Status) {
		if wait := r.memory.progress.wait(key, s.now, progressInterval); wait > 0 {
			s.lookAgain(wait)
			return nil
		}
	}
	err := r.client.Status().Patch(ctx, s.tj, client.MergeFrom(orig))
	if err == nil && s.tj.ResourceVersion != orig.ResourceVersion {
		r.memory.statusWrites.wrote(key, orig.ResourceVersion)
		if trainjob.Finished(s.tj) {
			// An ended job counts nothing more.
			r.memory.progress.forget(key)
		} else {
			r.memory.progress.wrote(key, s.now)
		}
	}
	// A job deleted meanwhile has no status left to write.
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("updating TrainJob status: %w", err)
	}
	return nil
}

// progressOnly reports whether two statuses differ only in what counts
// progress: conditions' messages (same types, statuses and reasons) and
// the replicated jobs' counts.
func progressOnly(a, b *trainer.TrainJobStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	ac, bc := a.DeepCopy(), b.DeepCopy()
	for _, st := range []*trainer.TrainJobStatus{ac, bc} {
		for i := range st.Conditions {
			st.Conditions[i].Message = ""
		}
		st.JobsStatus = nil
	}
	if !equality.Semantic.DeepEqual(ac, bc) {
		return false
	}
	// The same jobs, counted differently.
	if len(a.JobsStatus) != len(b.JobsStatus) {
		return false
	}
	for i := range a.JobsStatus {
		if a.JobsStatus[i].Name != b.JobsStatus[i].Name {
			return false
		}
	}
	return true
}
