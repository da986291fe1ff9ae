package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/plugin/migrate"
)

// Manifest is one object of a run -f input, with where it came from.
type Manifest struct {
	// Where is "FILE:LINE: KIND NAME" (or "FILE: document N" without a
	// line), for messages.
	Where  string
	Object *unstructured.Unstructured
	// Converted: the object was converted from an MPIJob.
	Converted bool
}

// IsTrainJob reports whether the manifest is a TrainJob.
func (m *Manifest) IsTrainJob() bool {
	return m.Object.GetKind() == trainer.TrainJobKind
}

// Load reads the TrainJobs of a manifest file: TrainJobs as they are,
// MPIJobs converted as kubectl mpi migrate converts them (with the
// TrainingRuntime a conversion may need), TrainingRuntimes the jobs refer
// to. notes are the conversions' findings worth reading; errs name the
// file, the document and the field.
func Load(source string, data []byte) (objs []*Manifest, notes []string, errs []error) {
	items := migrate.File(source, data, migrate.Options{})
	for n, it := range items {
		if it.Blank {
			continue
		}
		where := location(it, n+1)
		for _, f := range it.Findings {
			if f.Level >= migrate.LevelWarning && f.Level < migrate.LevelError {
				notes = append(notes, it.FormatFinding(f))
			}
		}
		if it.Failed() {
			for _, f := range it.Findings {
				if f.Level >= migrate.LevelError {
					errs = append(errs, errors.New(it.FormatFinding(f)))
				}
			}
			continue
		}
		if it.Converted() {
			created, err := it.Created()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			for _, o := range created {
				objs = append(objs, &Manifest{Where: where + " (converted to " + o.GetKind() + " " + o.GetName() + ")", Object: o, Converted: true})
			}
			continue
		}
		if it.Object == nil {
			continue
		}
		for _, o := range expandList(&unstructured.Unstructured{Object: it.Object}) {
			w := where
			if o.GetName() != it.Name || o.GetKind() != it.Kind {
				w += " item " + o.GetKind() + " " + o.GetName()
			}
			gv := o.GetAPIVersion()
			switch {
			case gv == trainer.GroupVersion.String() && (o.GetKind() == trainer.TrainJobKind || o.GetKind() == trainer.TrainingRuntimeKind):
				objs = append(objs, &Manifest{Where: w, Object: o})
			case o.GetKind() == trainer.TrainJobKind || o.GetKind() == trainer.TrainingRuntimeKind:
				errs = append(errs, fmt.Errorf("%s: apiVersion %q: use %s", w, gv, trainer.GroupVersion.String()))
			default:
				errs = append(errs, fmt.Errorf("%s: %s is not an MPI job: run -f takes TrainJobs, MPIJobs (%s) and the TrainingRuntimes they use; create other objects with kubectl apply",
					w, describeKind(o), migrate.MPIJobAPIVersion))
			}
		}
	}
	return objs, notes, errs
}

func describeKind(o *unstructured.Unstructured) string {
	if o.GetKind() == "" {
		return "a document without kind"
	}
	return "a " + o.GetKind() + " (" + o.GetAPIVersion() + ")"
}

func location(it *migrate.Item, n int) string {
	loc := it.Source
	if it.Line > 0 {
		loc += fmt.Sprintf(":%d", it.Line)
	} else {
		loc += fmt.Sprintf(": document %d", n)
	}
	if d := it.Describe(); d != "document" {
		loc += ": " + d
	}
	return loc
}

func expandList(o *unstructured.Unstructured) []*unstructured.Unstructured {
	if !o.IsList() {
		return []*unstructured.Unstructured{o}
	}
	var out []*unstructured.Unstructured
	_ = o.EachListItem(func(obj runtime.Object) error {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
		return nil
	})
	return out
}

// SetNamespace puts a manifest in the namespace of the command line:
// manifests without one get it; a different one is an error, unless the
// namespace was not given explicitly.
func SetNamespace(m *Manifest, namespace string, explicit bool) error {
	ns := m.Object.GetNamespace()
	switch {
	case ns == "":
		m.Object.SetNamespace(namespace)
	case ns != namespace && explicit:
		return fmt.Errorf("%s: its namespace %q does not match --namespace %q: drop one of them", m.Where, ns, namespace)
	}
	return nil
}

// CheckAll asks the API server (CRD schemas, Torus's webhooks) about every
// manifest without creating anything, with strict field validation so
// that misspelt fields are named. A TrainJob whose runtime is among the
// manifests cannot be checked against it before it exists; that one
// complaint is left out.
func CheckAll(ctx context.Context, c client.Client, objs []*Manifest) []error {
	batch := map[string]bool{}
	for _, m := range objs {
		if m.Object.GetKind() == trainer.TrainingRuntimeKind {
			batch[m.Object.GetNamespace()+"/"+m.Object.GetName()] = true
		}
	}
	var errs []error
	for _, m := range objs {
		probe := m.Object.DeepCopy()
		err := c.Create(ctx, probe, client.DryRunAll, client.FieldOwner(FieldManager), client.FieldValidation("Strict"))
		if err == nil {
			continue
		}
		if m.IsTrainJob() && onlyRuntimeMissing(err) && refersToBatch(m.Object, batch) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s", m.Where, Explain(err)))
	}
	return errs
}

func refersToBatch(tj *unstructured.Unstructured, batch map[string]bool) bool {
	kind, _, _ := unstructured.NestedString(tj.Object, "spec", "runtimeRef", "kind")
	name, _, _ := unstructured.NestedString(tj.Object, "spec", "runtimeRef", "name")
	return kind == trainer.TrainingRuntimeKind && batch[tj.GetNamespace()+"/"+name]
}

func onlyRuntimeMissing(err error) bool {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil {
		return false
	}
	causes := se.ErrStatus.Details.Causes
	return len(causes) == 1 && causes[0].Field == "spec.runtimeRef" && strings.Contains(causes[0].Message, "not found")
}

// Explain renders an API error for people: an invalid object's causes one
// per line, field first.
func Explain(err error) string {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) == 0 {
		return err.Error()
	}
	var b strings.Builder
	b.WriteString(se.ErrStatus.Message)
	if len(se.ErrStatus.Details.Causes) > 1 {
		b.WriteString("; fields:")
		for _, c := range se.ErrStatus.Details.Causes {
			b.WriteString("\n    ")
			if c.Field != "" {
				b.WriteString(c.Field + ": ")
			}
			b.WriteString(c.Message)
		}
	}
	return b.String()
}
