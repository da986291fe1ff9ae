package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// A job's SSH keys are its own: a TrainJob or runtime of any kind (Torus's
// or upstream's to run) that reads another job's key Secret, through an
// environment variable or a volume, would hand that job's keys to its pods.

// isKeySecret reports whether a Secret name is one Torus gives a job's keys.
func isKeySecret(name string) bool {
	return strings.HasSuffix(name, mpi.SSHSecretName(""))
}

func keySecretRef(path *field.Path, name string) *field.Error {
	return field.Forbidden(path, fmt.Sprintf("Secret %q holds an MPI job's SSH keys, which only that job's own pods receive: reference another Secret", name))
}

func envKeyRefs(path *field.Path, env []corev1.EnvVar) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && isKeySecret(e.ValueFrom.SecretKeyRef.Name) {
			errs = append(errs, keySecretRef(path.Index(i).Child("valueFrom", "secretKeyRef", "name"), e.ValueFrom.SecretKeyRef.Name))
		}
	}
	return errs
}

// trainJobKeyRefs finds references to key Secrets in a TrainJob.
func trainJobKeyRefs(tj *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	if t := tj.Spec.Trainer; t != nil {
		errs = append(errs, envKeyRefs(field.NewPath("spec", "trainer", "env"), t.Env)...)
	}
	if in := tj.Spec.Initializer; in != nil {
		if in.Dataset != nil {
			errs = append(errs, envKeyRefs(field.NewPath("spec", "initializer", "dataset", "env"), in.Dataset.Env)...)
			if r := in.Dataset.SecretRef; r != nil && isKeySecret(r.Name) {
				errs = append(errs, keySecretRef(field.NewPath("spec", "initializer", "dataset", "secretRef", "name"), r.Name))
			}
		}
		if in.Model != nil {
			errs = append(errs, envKeyRefs(field.NewPath("spec", "initializer", "model", "env"), in.Model.Env)...)
			if r := in.Model.SecretRef; r != nil && isKeySecret(r.Name) {
				errs = append(errs, keySecretRef(field.NewPath("spec", "initializer", "model", "secretRef", "name"), r.Name))
			}
		}
	}
	return errs
}

// runtimeKeyRefs finds references to key Secrets in a runtime's pods.
func runtimeKeyRefs(spec *trainer.TrainingRuntimeSpec) field.ErrorList {
	var errs field.ErrorList
	jobs := field.NewPath("spec", "template", "spec", "replicatedJobs")
	for i, rj := range spec.Template.Spec.ReplicatedJobs {
		pod := jobs.Index(i).Child("template", "spec", "template", "spec")
		ps := rj.Template.Spec.Template.Spec
		for j, v := range ps.Volumes {
			if v.Secret != nil && isKeySecret(v.Secret.SecretName) {
				errs = append(errs, keySecretRef(pod.Child("volumes").Index(j).Child("secret", "secretName"), v.Secret.SecretName))
			}
		}
		for _, list := range []struct {
			name string
			cs   []corev1.Container
		}{{"initContainers", ps.InitContainers}, {"containers", ps.Containers}} {
			for j, c := range list.cs {
				cp := pod.Child(list.name).Index(j)
				errs = append(errs, envKeyRefs(cp.Child("env"), c.Env)...)
				for k, ef := range c.EnvFrom {
					if ef.SecretRef != nil && isKeySecret(ef.SecretRef.Name) {
						errs = append(errs, keySecretRef(cp.Child("envFrom").Index(k).Child("secretRef", "name"), ef.SecretRef.Name))
					}
				}
			}
		}
	}
	return errs
}

// keyRefGuard refuses, before any other check, objects that reference key
// Secrets; nil lets the request through to the route.
func keyRefGuard(_ context.Context, req admission.Request) *admission.Response {
	if req.Operation == admissionv1.Delete {
		return nil
	}
	var errs field.ErrorList
	switch req.Kind.Kind {
	case trainer.TrainJobKind:
		var tj trainer.TrainJob
		if err := json.Unmarshal(req.Object.Raw, &tj); err != nil {
			return nil // the route's handlers report what cannot be decoded
		}
		errs = trainJobKeyRefs(&tj)
	case trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind:
		var rt struct {
			Spec trainer.TrainingRuntimeSpec `json:"spec"`
		}
		if err := json.Unmarshal(req.Object.Raw, &rt); err != nil {
			return nil
		}
		errs = runtimeKeyRefs(&rt.Spec)
	}
	if len(errs) == 0 {
		return nil
	}
	status := apierrors.NewInvalid(schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: req.Kind.Kind}, req.Name, errs).ErrStatus
	return &admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}
