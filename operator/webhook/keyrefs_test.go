package webhook

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const victim = "victim-mpi-ssh"

// leaf is one string field reachable in a type, and how to set it in a
// value of that type (allocating what leads to it).
type leaf struct {
	path string
	set  func(v reflect.Value, s string)
}

// stringLeaves enumerates, by reflection, every string field reachable in t,
// entering each slice and map once. Types already on the way down are not
// entered again (recursive schemas).
func stringLeaves(t reflect.Type, path string, onPath map[reflect.Type]bool) []leaf {
	switch t.Kind() {
	case reflect.String:
		return []leaf{{path, func(v reflect.Value, s string) { v.SetString(s) }}}
	case reflect.Pointer:
		var out []leaf
		for _, l := range stringLeaves(t.Elem(), path, onPath) {
			out = append(out, leaf{l.path, func(v reflect.Value, s string) {
				if v.IsNil() {
					v.Set(reflect.New(t.Elem()))
				}
				l.set(v.Elem(), s)
			}})
		}
		return out
	case reflect.Slice:
		var out []leaf
		for _, l := range stringLeaves(t.Elem(), path+"[0]", onPath) {
			out = append(out, leaf{l.path, func(v reflect.Value, s string) {
				if v.Len() == 0 {
					v.Set(reflect.MakeSlice(t, 1, 1))
				}
				l.set(v.Index(0), s)
			}})
		}
		return out
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil
		}
		var out []leaf
		for _, l := range stringLeaves(t.Elem(), path+"[k]", onPath) {
			out = append(out, leaf{l.path, func(v reflect.Value, s string) {
				e := reflect.New(t.Elem()).Elem()
				l.set(e, s)
				v.Set(reflect.MakeMap(t))
				v.SetMapIndex(reflect.ValueOf("k").Convert(t.Key()), e)
			}})
		}
		return out
	case reflect.Struct:
		if onPath[t] {
			return nil
		}
		onPath[t] = true
		defer delete(onPath, t)
		var out []leaf
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !sf.IsExported() || name == "-" {
				continue
			}
			p := path + "." + name
			if sf.Anonymous && name == "" {
				p = path
			}
			for _, l := range stringLeaves(sf.Type, p, onPath) {
				out = append(out, leaf{l.path, func(v reflect.Value, s string) { l.set(v.Field(i), s) }})
			}
		}
		return out
	}
	return nil
}

// namesASecret is the rule the guard must follow, stated on the JSON path:
// a secretName, or the name of a reference whose field says secret
// (secretRef, secretKeyRef, nodePublishSecretRef, imagePullSecrets[i], a
// projection's secret).
var namesASecret = regexp.MustCompile(`(\.secretName|(?i:secret)[A-Za-z]*(\[\d+\])?\.name)$`)

// TestEveryPodFieldNamingASecretIsGuarded sets every string field of a
// TrainJob's spec and of a runtime's spec, one at a time, to a key Secret's
// name and checks that exactly the fields naming a Secret are refused, at
// their own path. Pod specs inside a runtime's JobSet template and inside a
// TrainJob's runtime patches are reached alike.
func TestEveryPodFieldNamingASecretIsGuarded(t *testing.T) {
	cases := []struct {
		name     string
		typ      reflect.Type
		refs     func(v reflect.Value) []string
		mustHave []string
	}{
		{
			name: "TrainJob",
			typ:  reflect.TypeFor[trainer.TrainJobSpec](),
			refs: func(v reflect.Value) []string {
				return errorFields(trainJobKeyRefs(&trainer.TrainJob{Spec: v.Interface().(trainer.TrainJobSpec)}))
			},
			mustHave: []string{
				"spec.trainer.env[0].valueFrom.secretKeyRef.name",
				"spec.initializer.dataset.secretRef.name",
				"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].projected.sources[0].secret.name",
				"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.imagePullSecrets[0].name",
			},
		},
		{
			name: "runtime",
			typ:  reflect.TypeFor[trainer.TrainingRuntimeSpec](),
			refs: func(v reflect.Value) []string {
				spec := v.Interface().(trainer.TrainingRuntimeSpec)
				return errorFields(runtimeKeyRefs(&spec))
			},
			mustHave: []string{
				"spec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].secret.secretName",
				"spec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].csi.nodePublishSecretRef.name",
				"spec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].cephfs.secretRef.name",
				"spec.template.spec.replicatedJobs[0].template.spec.template.spec.initContainers[0].envFrom[0].secretRef.name",
				"spec.template.spec.replicatedJobs[0].template.spec.template.spec.ephemeralContainers[0].env[0].valueFrom.secretKeyRef.name",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refused := map[string]bool{}
			for _, l := range stringLeaves(tc.typ, "spec", map[reflect.Type]bool{}) {
				v := reflect.New(tc.typ).Elem()
				l.set(v, victim)
				got := tc.refs(v)
				want := namesASecret.MatchString(l.path)
				switch {
				case want && (len(got) != 1 || got[0] != l.path):
					t.Errorf("%s names a key Secret: refused at %v, want at %s", l.path, got, l.path)
				case !want && len(got) > 0:
					t.Errorf("%s does not name a Secret, but was refused at %v", l.path, got)
				}
				if want {
					refused[l.path] = true
				}
			}
			for _, p := range tc.mustHave {
				if !refused[p] {
					t.Errorf("the enumeration did not reach %s", p)
				}
			}
			t.Logf("%d fields naming a Secret", len(refused))
		})
	}
}

func TestAnotherSecretIsNotRefused(t *testing.T) {
	tj := &trainer.TrainJob{Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}}}}}}
	if errs := trainJobKeyRefs(tj); len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	errs := trainJobKeyRefs(&trainer.TrainJob{Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{Env: []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: victim}, Key: "ssh-privatekey"}}}}}}})
	if len(errs) != 1 || !strings.Contains(errs[0].Detail, `"victim-mpi-ssh" holds an MPI job's SSH keys`) {
		t.Fatalf("errors = %v, want the key Secret named", errs)
	}
}

func errorFields(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}
