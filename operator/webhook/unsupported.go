package webhook

import (
	"fmt"
	"maps"
	pathpkg "path"
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

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
// Torus cannot carry out, and runtime patches that would take from the job
// what makes it Torus's.
func validateUnsupportedJobFields(tj *trainer.TrainJob, rt *mpi.Runtime) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if tj.Spec.Initializer != nil {
		errs = append(errs, field.Forbidden(spec.Child("initializer"),
			"Torus runs MPI jobs without upstream's dataset and model initializers: fetch the data in the launcher's command, or use a runtime that is not MPI"))
	}
	for i, p := range tj.Spec.RuntimePatches {
		errs = append(errs, validateRuntimePatch(spec.Child("runtimePatches").Index(i), p, rt)...)
	}
	return errs
}

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

// validateRuntimePatch admits what upstream Trainer applies of a runtime
// patch, and refuses what it refuses, in Torus's words: a manager that is
// not a domain-prefixed path, replicated jobs and containers the runtime
// lacks, env of the node container (the TrainJob's spec.trainer.env says
// it). On top, what makes the job Torus's stays Torus's: its labels and
// annotations, the volumes holding its keys and hostfile and the places it
// mounts them, its init container and its scheduling gate.
func validateRuntimePatch(path *field.Path, p trainer.RuntimePatch, rt *mpi.Runtime) field.ErrorList {
	errs := validation.IsDomainPrefixedPath(path.Child("manager"), p.Manager)
	if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
		return errs
	}
	tmpl := path.Child("trainingRuntimeSpec", "template")
	errs = append(errs, validatePatchMetadata(tmpl.Child("metadata"), p.TrainingRuntimeSpec.Template.Metadata)...)
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
		if ps := rj.Template.Spec.Template.Spec; ps != nil {
			errs = append(errs, validatePodSpecPatch(jobs.Index(j).Child("template", "spec", "template", "spec"), rj.Name, ps, rt)...)
		}
	}
	return errs
}

// validatePodSpecPatch checks a patch of one replicated job's pods.
func validatePodSpecPatch(path *field.Path, job string, ps *trainer.PodSpecPatch, rt *mpi.Runtime) field.ErrorList {
	var errs field.ErrorList
	for i, v := range ps.Volumes {
		if mpi.IsTorusVolume(v.Name) {
			errs = append(errs, field.Forbidden(path.Child("volumes").Index(i).Child("name"),
				fmt.Sprintf("%s is the volume Torus gives the job's SSH keys and hostfile: give your volume another name", v.Name)))
		}
	}
	for i, g := range ps.SchedulingGates {
		if strings.HasPrefix(g.Name, api.Domain) {
			errs = append(errs, field.Forbidden(path.Child("schedulingGates").Index(i).Child("name"),
				fmt.Sprintf("gates under %s are Torus's: its pods wait behind them for their SSH keys; use a gate of your own", api.Domain)))
		}
	}
	pod := runtimePod(rt, job)
	for _, cs := range []struct {
		field, word string
		patch       []trainer.ContainerPatch
		has         []corev1.Container
	}{{"initContainers", "init container", ps.InitContainers, pod.InitContainers}, {"containers", "container", ps.Containers, pod.Containers}} {
		for i, c := range cs.patch {
			cp := path.Child(cs.field).Index(i)
			switch {
			case cs.field == "initContainers" && mpi.IsTorusInitContainer(c.Name):
				errs = append(errs, field.Forbidden(cp.Child("name"),
					fmt.Sprintf("%s is Torus's init container, which lays out the job's SSH keys or waits for its workers; patch the runtime's own init containers", c.Name)))
				continue
			case !slices.ContainsFunc(cs.has, func(have corev1.Container) bool { return have.Name == c.Name }):
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name,
					fmt.Sprintf("the runtime's %s job has no such %s: a runtime patch changes those it has (%s)", job, cs.word, containerNames(cs.has))))
				continue
			}
			if cs.field == "containers" && c.Name == mpi.TrainerContainer && len(c.Env) > 0 {
				errs = append(errs, field.Forbidden(cp.Child("env"),
					fmt.Sprintf("the %s container's environment is the TrainJob's: set it in spec.trainer.env, which reaches the launcher and every worker", mpi.TrainerContainer)))
			}
			errs = append(errs, validatePatchMounts(cp.Child("volumeMounts"), c, cs.field == "containers", rt)...)
		}
	}
	return errs
}

// validatePatchMounts refuses mounts of the volumes holding the job's keys,
// hostfile and launch agent (a container mounting them would get keys its
// role must not have), and, in the MPI container, mounts at or under the
// places Torus mounts them (mpi.TorusMountPaths).
func validatePatchMounts(path *field.Path, c trainer.ContainerPatch, container bool, rt *mpi.Runtime) field.ErrorList {
	var errs field.ErrorList
	torusPaths := mpi.TorusMountPaths(rt.SSHPath())
	for i, m := range c.VolumeMounts {
		if mpi.IsTorusVolume(m.Name) {
			errs = append(errs, field.Forbidden(path.Index(i).Child("name"),
				fmt.Sprintf("%s holds the job's SSH keys or hostfile, which Torus mounts where each role needs them: mount a volume of your own", m.Name)))
			continue
		}
		if !container || c.Name != mpi.TrainerContainer {
			continue
		}
		clean := pathpkg.Clean(m.MountPath)
		for _, p := range torusPaths {
			if clean == p || strings.HasPrefix(clean, p+"/") {
				errs = append(errs, field.Forbidden(path.Index(i).Child("mountPath"),
					fmt.Sprintf("Torus mounts the job's SSH files, hostfile and launch agent at or under %s: mount the volume elsewhere", strings.Join(torusPaths, ", "))))
				break
			}
		}
	}
	return errs
}

// runtimePod is the pod template of a runtime's replicated job.
func runtimePod(rt *mpi.Runtime, job string) *corev1.PodSpec {
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]; rj.Name == job {
			return &rj.Template.Spec.Template.Spec
		}
	}
	return &corev1.PodSpec{}
}

func containerNames(cs []corev1.Container) string {
	if len(cs) == 0 {
		return "none"
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// validatePatchChange refuses a change of a job's runtime patches unless
// the job is suspended before or after it (Kueue changes them and resumes
// the job in one update), as upstream Trainer does: a running job's pods
// keep what they started with.
func validatePatchChange(oldTJ, newTJ *trainer.TrainJob) field.ErrorList {
	if equality.Semantic.DeepEqual(oldTJ.Spec.RuntimePatches, newTJ.Spec.RuntimePatches) ||
		ptr.Deref(oldTJ.Spec.Suspend, false) || ptr.Deref(newTJ.Spec.Suspend, false) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "runtimePatches"),
		"a running job's runtime patches cannot change: its pods keep what they started with; suspend the job (spec.suspend) to change them")}
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
