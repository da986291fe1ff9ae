package wrappers

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

func types(s string) k8stypes.UID { return k8stypes.UID(s) }

// RuntimeWrapper wraps a ClusterTrainingRuntime.
type RuntimeWrapper struct{ trainer.ClusterTrainingRuntime }

// MakeMPIRuntime starts an MPI ClusterTrainingRuntime shaped like the
// shipped samples: a launcher running mpirun and workers running sshd as
// uid 1000.
func MakeMPIRuntime(name string, impl trainer.MPIImplementation) *RuntimeWrapper {
	sc := &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), AllowPrivilegeEscalation: ptr.To(false)}
	job := func(name string, labels map[string]string, c corev1.Container) jobsetv1alpha2.ReplicatedJob {
		return jobsetv1alpha2.ReplicatedJob{
			Name: name,
			Template: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{c},
				}}},
			},
		}
	}
	return &RuntimeWrapper{trainer.ClusterTrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.ClusterTrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{
				NumNodes: ptr.To[int32](1),
				MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{
					NumProcPerNode:    ptr.To[int32](1),
					MPIImplementation: ptr.To(impl),
					SSHAuthMountPath:  ptr.To("/home/mpiuser/.ssh"),
					RunLauncherAsNode: ptr.To(false),
				}},
			},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
				job(mpi.LauncherJob, map[string]string{mpi.LabelAncestor: mpi.AncestorTrainer}, corev1.Container{
					Name: mpi.TrainerContainer, Image: "mpi-pi:test", Command: []string{"mpirun"}, Args: []string{"/home/mpiuser/pi"}, SecurityContext: sc,
				}),
				job(mpi.NodeJob, nil, corev1.Container{
					Name: mpi.TrainerContainer, Image: "mpi-pi:test", Command: []string{"/usr/sbin/sshd"},
					Args: []string{"-De", "-f", "/home/mpiuser/.ssh/sshd_config"}, SecurityContext: sc,
				}),
			}}},
		},
	}}
}

// Obj returns the runtime.
func (w *RuntimeWrapper) Obj() *trainer.ClusterTrainingRuntime { return &w.ClusterTrainingRuntime }

// Runtime returns the runtime as the mpi package sees it.
func (w *RuntimeWrapper) Runtime() *mpi.Runtime {
	return &mpi.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: w.Name, Annotations: w.Annotations, Spec: w.Spec}
}

// Namespaced returns the runtime as a TrainingRuntime in a namespace.
func (w *RuntimeWrapper) Namespaced(namespace string) *trainer.TrainingRuntime {
	return &trainer.TrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: namespace, Annotations: w.Annotations},
		Spec:       *w.Spec.DeepCopy(),
	}
}

// Annotation sets an annotation.
func (w *RuntimeWrapper) Annotation(k, v string) *RuntimeWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// LauncherRunsRanks sets runLauncherAsNode.
func (w *RuntimeWrapper) LauncherRunsRanks(b bool) *RuntimeWrapper {
	w.Spec.MLPolicy.MPI.RunLauncherAsNode = ptr.To(b)
	return w
}

// WithoutReplicatedJob drops a replicated job, to make an invalid runtime.
func (w *RuntimeWrapper) WithoutReplicatedJob(name string) *RuntimeWrapper {
	jobs := w.Spec.Template.Spec.ReplicatedJobs[:0]
	for _, rj := range w.Spec.Template.Spec.ReplicatedJobs {
		if rj.Name != name {
			jobs = append(jobs, rj)
		}
	}
	w.Spec.Template.Spec.ReplicatedJobs = jobs
	return w
}

// NotMPI replaces the MPI policy with a Torch one.
func (w *RuntimeWrapper) NotMPI() *RuntimeWrapper {
	w.Spec.MLPolicy.MPI = nil
	w.Spec.MLPolicy.Torch = &trainer.TorchMLPolicySource{}
	return w
}
