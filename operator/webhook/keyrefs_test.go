package webhook

import (
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

func TestKeySecretReferencesAreRefused(t *testing.T) {
	keyRef := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "victim-mpi-ssh"}, Key: "ssh-privatekey"}}
	ownRef := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}
	jobs := map[string]struct {
		tj   *trainer.TrainJob
		want string
	}{
		"trainer env": {&trainer.TrainJob{Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{Env: []corev1.EnvVar{{Name: "K", ValueFrom: keyRef}}}}},
			"spec.trainer.env[0].valueFrom.secretKeyRef.name"},
		"dataset initializer's secret": {&trainer.TrainJob{Spec: trainer.TrainJobSpec{Initializer: &trainer.Initializer{Dataset: &trainer.DatasetInitializer{
			SecretRef: &corev1.LocalObjectReference{Name: "victim-mpi-ssh"}}}}}, "spec.initializer.dataset.secretRef.name"},
		"another Secret": {&trainer.TrainJob{Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{Env: []corev1.EnvVar{{Name: "T", ValueFrom: ownRef}}}}}, ""},
	}
	for name, tc := range jobs {
		t.Run(name, func(t *testing.T) {
			errs := trainJobKeyRefs(tc.tj)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.want || !strings.Contains(errs[0].Detail, `"victim-mpi-ssh" holds an MPI job's SSH keys`) {
				t.Fatalf("errors = %v, want one at %s", errs, tc.want)
			}
		})
	}

	pod := func(ps corev1.PodSpec) *trainer.TrainingRuntimeSpec {
		rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
		rj.Template.Spec.Template.Spec = ps
		return &trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{rj}}}}
	}
	runtimes := map[string]struct {
		spec *trainer.TrainingRuntimeSpec
		want string
	}{
		"volume": {pod(corev1.PodSpec{Volumes: []corev1.Volume{{Name: "k", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "victim-mpi-ssh"}}}}}),
			"spec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].secret.secretName"},
		"envFrom": {pod(corev1.PodSpec{Containers: []corev1.Container{{Name: "node", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "victim-mpi-ssh"}}}}}}}),
			"spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].envFrom[0].secretRef.name"},
		"init container env": {pod(corev1.PodSpec{InitContainers: []corev1.Container{{Name: "fetch", Env: []corev1.EnvVar{{Name: "K", ValueFrom: keyRef}}}}}),
			"spec.template.spec.replicatedJobs[0].template.spec.template.spec.initContainers[0].env[0].valueFrom.secretKeyRef.name"},
		"another Secret": {pod(corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Env: []corev1.EnvVar{{Name: "T", ValueFrom: ownRef}}}}}), ""},
	}
	for name, tc := range runtimes {
		t.Run("runtime "+name, func(t *testing.T) {
			errs := runtimeKeyRefs(tc.spec)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.want {
				t.Fatalf("errors = %v, want one at %s", errs, tc.want)
			}
		})
	}
}
