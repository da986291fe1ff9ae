package webhook

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// Fields of the Trainer API that Torus's MPI path does not carry out are
// refused here, naming the field and why, rather than accepted and then
// ignored. TestEveryFieldIsHonouredOrRefused keeps this list whole as the
// API grows.

// setField is a field by its JSON name, and whether an object sets it.
type setField struct {
	name string
	set  bool
}

// validateUnsupportedJobFields refuses the parts of an MPI TrainJob that
// Torus cannot carry out.
func validateUnsupportedJobFields(tj *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if tj.Spec.Initializer != nil {
		errs = append(errs, field.Forbidden(spec.Child("initializer"),
			"Torus runs MPI jobs without upstream's dataset and model initializers: fetch the data in the launcher's command, or use a runtime that is not MPI"))
	}
	for i, p := range tj.Spec.RuntimePatches {
		errs = append(errs, validateRuntimePatch(spec.Child("runtimePatches").Index(i), p)...)
	}
	return errs
}

// patchFieldWhy is why the pod fields of runtimePatches beyond metadata,
// nodeSelector, tolerations and schedulingGates are refused: those are what
// a queue or scheduler places pods with (and all Kueue writes); the rest
// change what the pods run, which is the runtime's to say.
const patchFieldWhy = "Torus applies the metadata, nodeSelector, tolerations and schedulingGates of an MPI job's runtimePatches; set this in the runtime instead"

// validatePatchMetadata refuses patches of Torus's own labels and
// annotations: they say which job a pod belongs to (its NetworkPolicy, its
// status, what kubectl mpi reaches).
func validatePatchMetadata(path *field.Path, m *metav1.ObjectMeta) field.ErrorList {
	if m == nil {
		return nil
	}
	var errs field.ErrorList
	for _, kv := range []struct {
		name string
		keys map[string]string
	}{{"labels", m.Labels}, {"annotations", m.Annotations}} {
		for _, k := range slices.Sorted(maps.Keys(kv.keys)) {
			if strings.HasPrefix(k, api.Domain) {
				errs = append(errs, field.Forbidden(path.Child(kv.name).Key(k),
					"keys under "+api.Domain+" are Torus's: they say which job a pod belongs to; use another prefix"))
			}
		}
	}
	return errs
}

func validateRuntimePatch(path *field.Path, p trainer.RuntimePatch) field.ErrorList {
	if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
		return nil
	}
	tmpl := path.Child("trainingRuntimeSpec", "template")
	errs := validatePatchMetadata(tmpl.Child("metadata"), p.TrainingRuntimeSpec.Template.Metadata)
	if p.TrainingRuntimeSpec.Template.Spec == nil {
		return errs
	}
	jobs := tmpl.Child("spec", "replicatedJobs")
	for j, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
		if rj.Name != mpi.LauncherJob && rj.Name != mpi.NodeJob {
			errs = append(errs, field.NotSupported(jobs.Index(j).Child("name"), rj.Name, []string{mpi.LauncherJob, mpi.NodeJob}))
		}
		if rj.Template == nil {
			continue
		}
		errs = append(errs, validatePatchMetadata(jobs.Index(j).Child("template", "metadata"), rj.Template.Metadata)...)
		if rj.Template.Spec == nil || rj.Template.Spec.Template == nil {
			continue
		}
		errs = append(errs, validatePatchMetadata(jobs.Index(j).Child("template", "spec", "template", "metadata"), rj.Template.Spec.Template.Metadata)...)
		if rj.Template.Spec.Template.Spec == nil {
			continue
		}
		ps := rj.Template.Spec.Template.Spec
		pod := jobs.Index(j).Child("template", "spec", "template", "spec")
		for _, f := range []setField{
			{"serviceAccountName", ps.ServiceAccountName != nil},
			{"volumes", len(ps.Volumes) > 0},
			{"initContainers", len(ps.InitContainers) > 0},
			{"containers", len(ps.Containers) > 0},
			{"imagePullSecrets", len(ps.ImagePullSecrets) > 0},
			{"securityContext", ps.SecurityContext != nil},
			{"affinity", ps.Affinity != nil},
			{"terminationGracePeriodSeconds", ps.TerminationGracePeriodSeconds != nil},
		} {
			if f.set {
				errs = append(errs, field.Forbidden(pod.Child(f.name), fmt.Sprintf("%s (runtime patch of %s)", patchFieldWhy, p.Manager)))
			}
		}
	}
	return errs
}

// validateUnsupportedRuntimeFields refuses the parts of an MPI runtime that
// Torus cannot carry out.
func validateUnsupportedRuntimeFields(rt *mpi.Runtime, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if rt.Spec.PodGroupPolicy != nil {
		errs = append(errs, field.Forbidden(path.Child("podGroupPolicy"),
			"Torus gang-schedules MPI jobs through Kueue (all ranks or none); remove podGroupPolicy and give the job a Kueue queue (kueue.x-k8s.io/queue-name)"))
	}
	ml := path.Child("mlPolicy")
	for _, f := range []setField{
		{"torch", rt.Spec.MLPolicy.Torch != nil},
		{"jax", rt.Spec.MLPolicy.JAX != nil},
		{"xgboost", rt.Spec.MLPolicy.XGBoost != nil},
		{"flux", rt.Spec.MLPolicy.Flux != nil},
	} {
		if f.set {
			errs = append(errs, field.Forbidden(ml.Child(f.name), "an MPI runtime's mlPolicy has mpi only: one launcher, one policy"))
		}
	}
	return errs
}
