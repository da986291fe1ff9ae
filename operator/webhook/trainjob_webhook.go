// Package webhook holds Torus's admission webhooks for TrainJobs and MPI
// runtimes: defaulting, and validation whose messages say how to fix the
// object.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/torus-mpi/torus/api"
	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// TrainJobWebhook defaults and validates TrainJobs that use MPI runtimes.
// TrainJobs of other runtimes pass through untouched.
type TrainJobWebhook struct {
	// runtimes reads ClusterTrainingRuntimes and TrainingRuntimes
	// (cacheFirst); client reads the rest from the API server.
	runtimes client.Reader
	client   client.Reader
	// maxNodes is the largest numNodes the operator runs (--max-nodes).
	maxNodes int32
}

// +kubebuilder:webhook:path=/mutate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=mtrainjob.torus-mpi.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=vtrainjob.torus-mpi.io,admissionReviewVersions=v1,timeoutSeconds=10

// Default labels MPI TrainJobs with their implementation, so that clients
// find MPI jobs with a label selector, and records who created each
// (api.AnnotationCreatedBy).
func (w *TrainJobWebhook) Default(ctx context.Context, tj *trainer.TrainJob) error {
	rt, err := trainjob.GetRuntime(ctx, w.runtimes, tj)
	if err != nil || !rt.IsMPI() {
		// Validation reports a missing runtime; other runtimes are not ours.
		return nil
	}
	if err := recordCreator(ctx, tj); err != nil {
		return err
	}
	impl, err := mpi.ResolveImplementation(ptr.Deref(rt.Spec.MLPolicy.MPI.MPIImplementation, ""), tj.Annotations, rt.Annotations)
	if err != nil {
		return nil
	}
	if tj.Labels == nil {
		tj.Labels = map[string]string{}
	}
	tj.Labels[api.LabelImplementation] = string(impl)
	return nil
}

// recordCreator writes, on create, the requesting user as the job's
// creator, over whatever the object said; on update it puts back what the
// stored job says, so the record is the API server's word, never a user's.
func recordCreator(ctx context.Context, tj *trainer.TrainJob) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil // not an admission request (a direct call)
	}
	creator := req.UserInfo.Username
	if req.Operation == admissionv1.Update {
		var old trainer.TrainJob
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return fmt.Errorf("reading the stored TrainJob %s: %w", tj.Name, err)
		}
		var recorded bool
		if creator, recorded = old.Annotations[api.AnnotationCreatedBy]; !recorded {
			// Created before Torus recorded creators: nobody's word.
			delete(tj.Annotations, api.AnnotationCreatedBy)
			return nil
		}
	}
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[api.AnnotationCreatedBy] = creator
	return nil
}

// ValidateCreate implements admission.Validator.
func (w *TrainJobWebhook) ValidateCreate(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, error) {
	return w.validate(ctx, tj, nil)
}

// ValidateUpdate validates spec changes, and changes to Torus's annotations
// (which shape the job as much as its spec). Other updates of a job whose
// runtime was since deleted must still go through.
func (w *TrainJobWebhook) ValidateUpdate(ctx context.Context, oldTJ, newTJ *trainer.TrainJob) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldTJ.Spec, newTJ.Spec) && maps.Equal(torusAnnotations(oldTJ), torusAnnotations(newTJ)) {
		return nil, nil
	}
	return w.validate(ctx, newTJ, oldTJ, validatePatchChange(oldTJ, newTJ)...)
}

// torusAnnotations are a job's annotations under Torus's domain.
func torusAnnotations(tj *trainer.TrainJob) map[string]string {
	out := map[string]string{}
	for k, v := range tj.Annotations {
		if strings.HasPrefix(k, api.Domain) {
			out[k] = v
		}
	}
	return out
}

// ValidateDelete implements admission.Validator.
func (w *TrainJobWebhook) ValidateDelete(context.Context, *trainer.TrainJob) (admission.Warnings, error) {
	return nil, nil
}

// validate checks an MPI TrainJob, and an update's against the job it
// replaces (old; nil on create); errs are an update's own findings,
// reported with the rest.
func (w *TrainJobWebhook) validate(ctx context.Context, tj, old *trainer.TrainJob, errs ...*field.Error) (admission.Warnings, error) {
	if m := ptr.Deref(tj.Spec.ManagedBy, mpi.TrainerManagedBy); m != mpi.TrainerManagedBy {
		return nil, nil
	}
	rt, err := trainjob.GetRuntime(ctx, w.runtimes, tj)
	if err != nil {
		if refErr := (*trainjob.RuntimeRefError)(nil); errors.As(err, &refErr) {
			return nil, invalid(tj, field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), tj.Spec.RuntimeRef.Name, err.Error())})
		}
		return nil, fmt.Errorf("reading the runtime of TrainJob %s: %w", tj.Name, err)
	}
	if !rt.IsMPI() {
		return nil, nil
	}
	errs = append(errs, validateTrainJob(tj, rt, w.maxNodes)...)
	profileErr, err := w.profileAccess(ctx, tj, rt)
	if err != nil {
		return nil, err
	}
	if profileErr != nil {
		errs = append(errs, profileErr)
	}
	checkpointErr, err := w.checkpointClaim(ctx, tj, old, rt)
	if err != nil {
		return nil, err
	}
	if checkpointErr != nil {
		errs = append(errs, checkpointErr)
	}
	return gpuWarnings(tj, rt), invalid(tj, errs)
}

// gpuWarnings are what the job's GPUs per worker cannot do for its ranks:
// a warning, as a program may share GPUs on purpose.
func gpuWarnings(tj *trainer.TrainJob, rt *mpi.Runtime) admission.Warnings {
	job, err := mpi.ResolveJob(tj, rt)
	if err != nil {
		// validateTrainJob has said why.
		return nil
	}
	gpus, resources := mpi.GPUsPerNode(tj, rt)
	return mpi.GPUWarnings(job, gpus, resources)
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get

// checkpointClaim refuses a job whose checkpoint claim does not exist or
// cannot be shared by its pods: such a job could not start, or its ranks
// could not all write their checkpoints. An update is checked only when it
// names another claim: a claim gone since must not keep a job from being
// suspended or stopped. The claim is read from the API server, not cached:
// claims are users' objects, and few jobs name one.
func (w *TrainJobWebhook) checkpointClaim(ctx context.Context, tj, old *trainer.TrainJob, rt *mpi.Runtime) (*field.Error, error) {
	v, ok := tj.Annotations[api.AnnotationCheckpointVolume]
	if !ok || (old != nil && old.Annotations[api.AnnotationCheckpointVolume] == v) {
		return nil, nil
	}
	c, err := mpi.ParseCheckpoint(v, rt.SSHPath())
	if err != nil {
		// validateTrainJob has said so.
		return nil, nil
	}
	var pvc corev1.PersistentVolumeClaim
	found := &pvc
	switch err := w.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: c.Claim}, &pvc); {
	case apierrors.IsNotFound(err):
		found = nil
	case err != nil:
		return nil, fmt.Errorf("reading PersistentVolumeClaim %s: %w", c.Claim, err)
	}
	if refusal := c.Refusal(found); refusal != "" {
		return field.Invalid(field.NewPath("metadata", "annotations").Key(api.AnnotationCheckpointVolume), v, refusal), nil
	}
	return nil, nil
}

// profileAccess refuses a job whose namespace may not use the network
// profile it selects (the profile's namespaceSelector). A profile that
// does not exist is the operator's to report: it may be created after the
// job.
func (w *TrainJobWebhook) profileAccess(ctx context.Context, tj *trainer.TrainJob, rt *mpi.Runtime) (*field.Error, error) {
	name := mpi.ProfileName(tj.Annotations, rt.Annotations)
	if name == "" {
		return nil, nil
	}
	var profile torusv1alpha1.MPINetworkProfile
	if err := w.client.Get(ctx, client.ObjectKey{Name: name}, &profile); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading MPINetworkProfile %s: %w", name, err)
	}
	if profile.Spec.NamespaceSelector == nil {
		return nil, nil
	}
	var ns corev1.Namespace
	if err := w.client.Get(ctx, client.ObjectKey{Name: tj.Namespace}, &ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", tj.Namespace, err)
	}
	refusal, err := mpi.ProfileRefusal(&profile, &ns)
	if err != nil || refusal == "" {
		return nil, err
	}
	path := field.NewPath("metadata", "annotations").Key(api.AnnotationNetworkProfile)
	if tj.Annotations[api.AnnotationNetworkProfile] == "" {
		path = field.NewPath("spec", "runtimeRef")
	}
	return field.Forbidden(path, refusal), nil
}

// annotationErrors reports the Torus annotations with bad values
// (mpi.CheckAnnotations), in a stable order: an object's own at
// metadata.annotations[key], or, with a runtime, the runtime's at a
// TrainJob's spec.runtimeRef (a runtime admitted before its annotations
// were checked).
func annotationErrors(annotations map[string]string, runtime *mpi.Runtime) field.ErrorList {
	bad := mpi.CheckAnnotations(annotations)
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(bad)) {
		if runtime != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "runtimeRef"), annotations[k],
				fmt.Sprintf("%s %s: %v", runtime.Kind, runtime.Name, bad[k])))
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(k), annotations[k], bad[k].Error()))
	}
	return errs
}

func invalid(tj *trainer.TrainJob, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind(), tj.Name, errs)
}

// validateTrainJob checks an MPI TrainJob against its runtime.
func validateTrainJob(tj *trainer.TrainJob, rt *mpi.Runtime, maxNodes int32) field.ErrorList {
	var errs field.ErrorList
	trainerPath := field.NewPath("spec", "trainer")
	if t := tj.Spec.Trainer; t != nil {
		if t.NumNodes != nil && *t.NumNodes < 1 {
			errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), *t.NumNodes,
				"must be at least 1: it is the number of MPI nodes (pods running ranks)"))
		}
		if t.NumNodes != nil && *t.NumNodes > maxNodes {
			errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), *t.NumNodes,
				fmt.Sprintf("must be at most %d, the nodes this Torus operator runs a job (its --max-nodes): use fewer nodes, or more slots per node (numProcPerNode)", maxNodes)))
		}
		if t.NumProcPerNode != nil && *t.NumProcPerNode < 1 {
			errs = append(errs, field.Invalid(trainerPath.Child("numProcPerNode"), *t.NumProcPerNode,
				"must be at least 1: it is the number of MPI ranks (slots) on each node"))
		}
		if t.NumProcPerNode != nil && *t.NumProcPerNode > mpi.MaxSlotsPerNode {
			errs = append(errs, field.Invalid(trainerPath.Child("numProcPerNode"), *t.NumProcPerNode,
				fmt.Sprintf("must be at most %d ranks (slots) on a node", mpi.MaxSlotsPerNode)))
		}
		for i, e := range t.Env {
			if mpi.ReservedEnvNames.Has(e.Name) {
				errs = append(errs, field.Forbidden(trainerPath.Child("env").Index(i).Child("name"),
					fmt.Sprintf("%s is set by Torus from the job's hostfile and SSH settings; remove it (reserved: %s)",
						e.Name, strings.Join(sets.List(mpi.ReservedEnvNames), ", "))))
			}
		}
	}
	if t := tj.Spec.Trainer; t != nil && t.Image != nil {
		if _, err := name.ParseReference(*t.Image); err != nil {
			errs = append(errs, field.Invalid(trainerPath.Child("image"), *t.Image,
				fmt.Sprintf("not an image reference (%v): set it to one such as registry.example.com/team/mpi-app:1.0, or leave it out for the runtime's", err)))
		}
	}
	errs = append(errs, annotationErrors(tj.Annotations, nil)...)
	errs = append(errs, validateUnsupportedJobFields(tj, rt)...)
	errs = append(errs, validateMPIRuntime(rt, field.NewPath("spec", "runtimeRef"))...)
	errs = append(errs, annotationErrors(rt.Annotations, rt)...)
	if len(errs) > 0 {
		return errs
	}
	job, err := mpi.ResolveJob(tj, rt)
	if sizeErr := (*mpi.SizeError)(nil); errors.As(err, &sizeErr) {
		// Sizes the job did not set come from its runtime.
		return field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), tj.Spec.RuntimeRef.Name, "the runtime's "+sizeErr.Error())}
	}
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), tj.Annotations, err.Error())}
	}
	if err := job.CheckSize(maxNodes); err != nil {
		return field.ErrorList{field.Invalid(trainerPath.Child("numNodes"), job.NumNodes, err.Error())}
	}
	if problems := mpi.TrainJobNameProblems(tj.Name, job.Workers); len(problems) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), tj.Name, strings.Join(problems, "; ")))
	}
	if len(errs) > 0 {
		return errs
	}
	return jobSetSizeErrors(tj, rt, job)
}

// SetupWebhooks registers Torus's webhooks with a manager; maxNodes is the
// largest numNodes the operator runs (zero: mpi.DefaultMaxNodes). upstream
// holds upstream Trainer's webhooks by path (upstream.Framework.Webhooks):
// objects that are not MPI go to them. Without them, Torus admits such
// objects unchecked.
func SetupWebhooks(mgr ctrl.Manager, maxNodes int32, upstream map[string]http.Handler) error {
	if maxNodes == 0 {
		maxNodes = mpi.DefaultMaxNodes
	}
	runtimes := cacheFirst{cache: mgr.GetCache(), api: mgr.GetAPIReader()}
	s := mgr.GetScheme()
	tjw := &TrainJobWebhook{runtimes: runtimes, client: mgr.GetAPIReader(), maxNodes: maxNodes}
	hooks := []struct {
		path  string
		torus *admission.Webhook
		mpi   func(context.Context, admission.Request) (bool, error)
	}{
		{"/mutate-trainer-kubeflow-org-v1alpha1-trainjob", admission.WithDefaulter[*trainer.TrainJob](s, tjw), trainJobIsMPI(runtimes)},
		{"/validate-trainer-kubeflow-org-v1alpha1-trainjob", admission.WithValidator[*trainer.TrainJob](s, tjw), trainJobIsMPI(runtimes)},
		{"/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime", admission.WithValidator[*trainer.ClusterTrainingRuntime](s, ClusterTrainingRuntimeWebhook{}), runtimeIsMPI},
		{"/validate-trainer-kubeflow-org-v1alpha1-trainingruntime", admission.WithValidator[*trainer.TrainingRuntime](s, TrainingRuntimeWebhook{}), runtimeIsMPI},
	}
	for _, h := range hooks {
		r := route{torus: h.torus, mpi: h.mpi}
		if strings.HasPrefix(h.path, "/validate-") {
			r.guard = keyRefGuard
		}
		if upstream != nil {
			u, ok := upstream[h.path].(handler)
			if !ok {
				return fmt.Errorf("upstream Trainer has no admission webhook at %s", h.path)
			}
			r.upstream = u
		}
		mgr.GetWebhookServer().Register(h.path, &admission.Webhook{Handler: r})
	}
	return nil
}

// cacheFirst reads an object from the manager's cache, and from the API
// server when the cache cannot give it: a runtime created just before its
// TrainJob (one kubectl apply) may not be cached yet, and the cache is not
// started when the webhooks first serve. Each webhook reads a TrainJob's
// runtime twice; from the cache, admission does no request of its own, so
// its latency does not add up the control plane's under load, and the API
// server and etcd serve no reads for it.
type cacheFirst struct {
	cache, api client.Reader
}

func (r cacheFirst) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.cache.Get(ctx, key, obj, opts...); err == nil {
		return nil
	}
	return r.api.Get(ctx, key, obj, opts...)
}

func (r cacheFirst) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.api.List(ctx, list, opts...)
}
