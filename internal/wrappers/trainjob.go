// Package wrappers builds Trainer objects for tests:
// MakeTrainJob("pi", "ns").NumNodes(4).Obj().
package wrappers

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TrainJobWrapper wraps a TrainJob.
type TrainJobWrapper struct{ trainer.TrainJob }

// MakeTrainJob starts a TrainJob referring to a ClusterTrainingRuntime.
func MakeTrainJob(name, namespace string) *TrainJobWrapper {
	return &TrainJobWrapper{trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	}}
}

// Obj returns the TrainJob.
func (w *TrainJobWrapper) Obj() *trainer.TrainJob { return &w.TrainJob }

func (w *TrainJobWrapper) trainer() *trainer.Trainer {
	if w.Spec.Trainer == nil {
		w.Spec.Trainer = &trainer.Trainer{}
	}
	return w.Spec.Trainer
}

// RuntimeRef refers to a ClusterTrainingRuntime.
func (w *TrainJobWrapper) RuntimeRef(name string) *TrainJobWrapper {
	w.Spec.RuntimeRef = trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	return w
}

// NamespacedRuntimeRef refers to a TrainingRuntime in the job's namespace.
func (w *TrainJobWrapper) NamespacedRuntimeRef(name string) *TrainJobWrapper {
	w.Spec.RuntimeRef = trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)}
	return w
}

// NumNodes sets spec.trainer.numNodes.
func (w *TrainJobWrapper) NumNodes(n int32) *TrainJobWrapper {
	w.trainer().NumNodes = ptr.To(n)
	return w
}

// NumProcPerNode sets spec.trainer.numProcPerNode.
func (w *TrainJobWrapper) NumProcPerNode(n int32) *TrainJobWrapper {
	w.trainer().NumProcPerNode = ptr.To(n)
	return w
}

// Image sets spec.trainer.image.
func (w *TrainJobWrapper) Image(image string) *TrainJobWrapper {
	w.trainer().Image = ptr.To(image)
	return w
}

// Command sets spec.trainer.command.
func (w *TrainJobWrapper) Command(cmd ...string) *TrainJobWrapper {
	w.trainer().Command = cmd
	return w
}

// Env adds a variable to spec.trainer.env.
func (w *TrainJobWrapper) Env(name, value string) *TrainJobWrapper {
	w.trainer().Env = append(w.trainer().Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// Resources sets spec.trainer.resourcesPerNode.
func (w *TrainJobWrapper) Resources(r corev1.ResourceRequirements) *TrainJobWrapper {
	w.trainer().ResourcesPerNode = &r
	return w
}

// Suspend sets spec.suspend.
func (w *TrainJobWrapper) Suspend(s bool) *TrainJobWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// ActiveDeadlineSeconds sets spec.activeDeadlineSeconds.
func (w *TrainJobWrapper) ActiveDeadlineSeconds(s int64) *TrainJobWrapper {
	w.Spec.ActiveDeadlineSeconds = s
	return w
}

// Annotation sets an annotation.
func (w *TrainJobWrapper) Annotation(k, v string) *TrainJobWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// UID sets the UID, for builder tests without an API server.
func (w *TrainJobWrapper) UID(uid string) *TrainJobWrapper {
	w.ObjectMeta.UID = types(uid)
	return w
}

// PodPatch adds a runtime patch of manager to the pods of the named
// replicated jobs.
func (w *TrainJobWrapper) PodPatch(manager string, ps trainer.PodSpecPatch, jobs ...string) *TrainJobWrapper {
	var rjs []trainer.ReplicatedJobPatch
	for _, j := range jobs {
		rjs = append(rjs, trainer.ReplicatedJobPatch{Name: j, Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: ps.DeepCopy()}},
		}})
	}
	w.Spec.RuntimePatches = append(w.Spec.RuntimePatches, trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjs}},
	}})
	return w
}
