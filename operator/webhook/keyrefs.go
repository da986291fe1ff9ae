package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// A job's SSH keys are its own: a TrainJob or runtime of any kind (Torus's
// or upstream's to run) that names another job's key Secret anywhere a pod
// can take a Secret from (a volume of any type, a projection, an
// environment variable, envFrom, an image pull secret, a CSI or flex
// driver's secret, an initializer's secretRef, a runtime patch) would hand
// that job's keys to its pods.
//
// The objects are walked by reflection rather than field by field, so that
// a field a later Kubernetes or Trainer version adds is covered the day the
// module is bumped: a Secret is named by a string field called SecretName,
// or by the Name of a reference held in a field whose name says Secret
// (SecretRef, SecretKeyRef, NodePublishSecretRef, ImagePullSecrets, a
// projection's Secret).

// isKeySecret reports whether a Secret name is one Torus gives a job's keys.
func isKeySecret(name string) bool {
	return strings.HasSuffix(name, mpi.SSHSecretName(""))
}

func keySecretRef(path *field.Path, name string) *field.Error {
	return field.Forbidden(path, fmt.Sprintf("Secret %q holds an MPI job's SSH keys, which only that job's own pods receive: reference another Secret", name))
}

// trainJobKeyRefs finds references to key Secrets in a TrainJob's spec,
// its runtime patches included.
func trainJobKeyRefs(tj *trainer.TrainJob) field.ErrorList {
	return keyRefs(field.NewPath("spec"), reflect.ValueOf(&tj.Spec))
}

// runtimeKeyRefs finds references to key Secrets in a runtime's spec.
func runtimeKeyRefs(spec *trainer.TrainingRuntimeSpec) field.ErrorList {
	return keyRefs(field.NewPath("spec"), reflect.ValueOf(spec))
}

// keyRefs walks v and returns an error for each key Secret it names.
func keyRefs(path *field.Path, v reflect.Value) field.ErrorList {
	var errs field.ErrorList
	walkSecretNames(path, v, false, func(p *field.Path, name string) {
		if isKeySecret(name) {
			errs = append(errs, keySecretRef(p, name))
		}
	})
	return errs
}

// walkSecretNames calls found with every Secret name under v. secret says
// v was reached through a field whose name says it refers to a Secret, so
// its Name (or its elements' Names) is one.
func walkSecretNames(path *field.Path, v reflect.Value, secret bool, found func(*field.Path, string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkSecretNames(path, v.Elem(), secret, found)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkSecretNames(path.Index(i), v.Index(i), secret, found)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if iter.Key().Kind() == reflect.String {
				walkSecretNames(path.Key(iter.Key().String()), iter.Value(), false, found)
			}
		}
	case reflect.Struct:
		if secret {
			if name := v.FieldByName("Name"); name.IsValid() && name.Kind() == reflect.String && name.String() != "" {
				found(path.Child("name"), name.String())
			}
		}
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			jsonName, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if jsonName == "-" {
				continue
			}
			fv := v.Field(i)
			p := path.Child(jsonName)
			if sf.Anonymous && jsonName == "" {
				p = path // inlined: its fields are the parent's
			}
			if sf.Name == "SecretName" && fv.Kind() == reflect.String {
				if fv.String() != "" {
					found(p, fv.String())
				}
				continue
			}
			walkSecretNames(p, fv, namesSecret(sf.Name), found)
		}
	}
}

// namesSecret: a field of this name refers to Secrets (SecretRef,
// SecretKeyRef, NodePublishSecretRef, ImagePullSecrets, Secret), not to a
// path on the node (CephFS's SecretFile) or a namespace.
func namesSecret(goName string) bool {
	return strings.Contains(goName, "Secret") && !strings.HasSuffix(goName, "File") && !strings.HasSuffix(goName, "Namespace")
}

// creatorErrs refuses a TrainJob whose api.AnnotationCreatedBy is not the
// API server's word, whichever webhook mutated it (Torus's, for MPI jobs,
// or upstream's): on create it may only name the requesting user, and an
// update may not change or add it. Without this, a job created on another
// runtime could carry a claim that Torus later shows as its creator.
func creatorErrs(req admission.Request, tj *trainer.TrainJob) field.ErrorList {
	path := field.NewPath("metadata", "annotations").Key(api.AnnotationCreatedBy)
	got, set := tj.Annotations[api.AnnotationCreatedBy]
	switch req.Operation {
	case admissionv1.Create:
		if set && got != req.UserInfo.Username {
			return field.ErrorList{field.Forbidden(path, "it records who created the job, which Torus writes from the request's identity: remove it")}
		}
	case admissionv1.Update:
		var old trainer.TrainJob
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return nil
		}
		if want, had := old.Annotations[api.AnnotationCreatedBy]; set != had || got != want {
			return field.ErrorList{field.Forbidden(path, "it records who created the job and cannot be changed, added or removed")}
		}
	}
	return nil
}

// keyRefGuard refuses, before any other check, objects that reference key
// Secrets, and TrainJobs whose creator record is not the API server's
// word; nil lets the request through to the route.
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
		errs = append(trainJobKeyRefs(&tj), creatorErrs(req, &tj)...)
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
