package webhook

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=clustertrainingruntimes,verbs=create;update,versions=v1alpha1,name=vclustertrainingruntime.torus-mpi.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainingruntime,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainingruntimes,verbs=create;update,versions=v1alpha1,name=vtrainingruntime.torus-mpi.io,admissionReviewVersions=v1,timeoutSeconds=10

// ClusterTrainingRuntimeWebhook validates cluster-wide MPI runtimes.
type ClusterTrainingRuntimeWebhook struct{}

// ValidateCreate implements admission.Validator.
func (ClusterTrainingRuntimeWebhook) ValidateCreate(_ context.Context, r *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, runtimeInvalid(trainer.ClusterTrainingRuntimeKind, r.Name, r.Annotations, r.Spec)
}

// ValidateUpdate implements admission.Validator.
func (ClusterTrainingRuntimeWebhook) ValidateUpdate(_ context.Context, _, r *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, runtimeInvalid(trainer.ClusterTrainingRuntimeKind, r.Name, r.Annotations, r.Spec)
}

// ValidateDelete implements admission.Validator.
func (ClusterTrainingRuntimeWebhook) ValidateDelete(context.Context, *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

// TrainingRuntimeWebhook validates namespaced MPI runtimes.
type TrainingRuntimeWebhook struct{}

// ValidateCreate implements admission.Validator.
func (TrainingRuntimeWebhook) ValidateCreate(_ context.Context, r *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, runtimeInvalid(trainer.TrainingRuntimeKind, r.Name, r.Annotations, r.Spec)
}

// ValidateUpdate implements admission.Validator.
func (TrainingRuntimeWebhook) ValidateUpdate(_ context.Context, _, r *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, runtimeInvalid(trainer.TrainingRuntimeKind, r.Name, r.Annotations, r.Spec)
}

// ValidateDelete implements admission.Validator.
func (TrainingRuntimeWebhook) ValidateDelete(context.Context, *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

func runtimeInvalid(kind, name string, annotations map[string]string, spec trainer.TrainingRuntimeSpec) error {
	rt := &mpi.Runtime{Kind: kind, Name: name, Annotations: annotations, Spec: spec}
	if !rt.IsMPI() {
		return nil
	}
	errs := validateMPIRuntime(rt, field.NewPath("spec"))
	errs = append(errs, annotationErrors(annotations, nil)...)
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: kind}, name, errs)
}

// validateMPIRuntime checks what Torus needs of an MPI runtime. path is
// where errors are reported: the runtime's spec, or a TrainJob's runtimeRef.
func validateMPIRuntime(rt *mpi.Runtime, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	policy := rt.Spec.MLPolicy
	mlPath := path.Child("mlPolicy")
	if policy.NumNodes != nil && *policy.NumNodes < 1 {
		errs = append(errs, field.Invalid(mlPath.Child("numNodes"), *policy.NumNodes, "must be at least 1"))
	}
	if policy.NumNodes != nil && *policy.NumNodes > mpi.AbsoluteMaxNodes {
		errs = append(errs, field.Invalid(mlPath.Child("numNodes"), *policy.NumNodes, fmt.Sprintf("must be at most %d", mpi.AbsoluteMaxNodes)))
	}
	if n := policy.MPI.NumProcPerNode; n != nil && *n < 1 {
		errs = append(errs, field.Invalid(mlPath.Child("mpi", "numProcPerNode"), *n, "must be at least 1: it is the number of MPI ranks (slots) on each node"))
	}
	if p := policy.MPI.SSHAuthMountPath; p != nil {
		if err := mpi.CheckSSHPath(*p); err != nil {
			errs = append(errs, field.Invalid(mlPath.Child("mpi", "sshAuthMountPath"), *p, err.Error()))
		}
	}
	if n := policy.MPI.NumProcPerNode; n != nil && *n > mpi.MaxSlotsPerNode {
		errs = append(errs, field.Invalid(mlPath.Child("mpi", "numProcPerNode"), *n, fmt.Sprintf("must be at most %d ranks (slots) on a node", mpi.MaxSlotsPerNode)))
	}
	if _, err := mpi.ResolveImplementation(ptr.Deref(policy.MPI.MPIImplementation, ""), rt.Annotations); err != nil {
		errs = append(errs, field.Invalid(mlPath.Child("mpi", "mpiImplementation"), ptr.Deref(policy.MPI.MPIImplementation, ""), err.Error()))
	}
	errs = append(errs, validateUnsupportedRuntimeFields(rt, path)...)
	jobsPath := path.Child("template", "spec", "replicatedJobs")
	for _, want := range []string{mpi.LauncherJob, mpi.NodeJob} {
		found := false
		for i, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			if rj.Name != want {
				continue
			}
			found = true
			hasContainer := false
			for _, c := range rj.Template.Spec.Template.Spec.Containers {
				hasContainer = hasContainer || c.Name == mpi.TrainerContainer
			}
			if !hasContainer {
				errs = append(errs, field.Required(jobsPath.Index(i).Child("template", "spec", "template", "spec", "containers"),
					fmt.Sprintf("%s %q: replicated job %q needs a container named %q, which runs the MPI program", rt.Kind, rt.Name, want, mpi.TrainerContainer)))
			}
		}
		if !found {
			errs = append(errs, field.Required(jobsPath,
				fmt.Sprintf("%s %q has no replicated job %q: an MPI runtime needs a %q job (mpirun) and a %q job (workers running sshd)",
					rt.Kind, rt.Name, want, mpi.LauncherJob, mpi.NodeJob)))
		}
	}
	return errs
}
