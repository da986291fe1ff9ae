package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/migrate"
)

// readFiles reads the manifests of run -f: files, or standard input for
// "-", loaded as load does and put in the command line's namespace as
// setNamespace does. notes are the conversions' findings worth reading.
// The error lists every problem of every file; nothing may be created
// when it is set.
func readFiles(names []string, stdin io.Reader, namespace string, explicitNS bool) (all []*manifest, notes []string, err error) {
	var errs []error
	for _, name := range names {
		data, source, err := readInput(name, stdin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs, n, ferrs := load(source, data)
		notes = append(notes, n...)
		errs = append(errs, ferrs...)
		all = append(all, objs...)
	}
	for _, m := range all {
		if err := setNamespace(m, namespace, explicitNS); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && len(all) == 0 {
		errs = append(errs, errors.New("no TrainJob or MPIJob in the input"))
	}
	if len(errs) > 0 {
		return nil, notes, fmt.Errorf("nothing was created:\n%w", errors.Join(errs...))
	}
	return all, notes, nil
}

func readInput(name string, stdin io.Reader) ([]byte, string, error) {
	if name == "-" {
		data, err := cmdutil.ReadAll(stdin, "standard input")
		return data, migrate.StdinSource, err
	}
	data, err := cmdutil.ReadFile(name)
	if err != nil {
		return nil, name, fmt.Errorf("reading %s: %w", name, err)
	}
	return data, name, nil
}

// createAll creates manifests that checkAll passed, runtimes first since
// the jobs refer to them; a dry run creates none. Each object is handed to
// print as its Go type, so that printers name its kind. It returns the
// TrainJobs, to wait for.
func createAll(ctx context.Context, c client.Client, all []*manifest, dryRun string, print func(runtime.Object) error) ([]*trainer.TrainJob, error) {
	var jobs []*trainer.TrainJob
	ordered := append(filter(all, func(m *manifest) bool { return !m.IsTrainJob() }), filter(all, (*manifest).IsTrainJob)...)
	for _, m := range ordered {
		if dryRun == cmdutil.DryRunNone {
			if err := c.Create(ctx, m.Object, client.FieldOwner(fieldManager)); err != nil {
				return jobs, fmt.Errorf("%s: %s", m.Where, explain(err))
			}
		}
		obj, err := typed(m.Object)
		if err != nil {
			return jobs, fmt.Errorf("%s: %w", m.Where, err)
		}
		if err := print(obj); err != nil {
			return jobs, err
		}
		if tj, ok := obj.(*trainer.TrainJob); ok {
			jobs = append(jobs, tj)
		}
	}
	return jobs, nil
}

func filter(ms []*manifest, keep func(*manifest) bool) []*manifest {
	var out []*manifest
	for _, m := range ms {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// typed converts a manifest to its Go type; one of a kind the scheme does
// not know stays unstructured.
func typed(u *unstructured.Unstructured) (runtime.Object, error) {
	obj, err := scheme.New().New(u.GroupVersionKind())
	if err != nil {
		return u, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	return obj, nil
}

// manifest is one object of a run -f input, with where it came from.
type manifest struct {
	// Where is "FILE:LINE: KIND NAME" (or "FILE: document N" without a
	// line), for messages.
	Where  string
	Object *unstructured.Unstructured
	// Converted: the object was converted from an MPIJob.
	Converted bool
}

// IsTrainJob reports whether the manifest is a TrainJob.
func (m *manifest) IsTrainJob() bool {
	return m.Object.GetKind() == trainer.TrainJobKind
}

// load reads the TrainJobs of a manifest file: TrainJobs as they are,
// MPIJobs converted as kubectl mpi migrate converts them (with the
// TrainingRuntime a conversion may need), TrainingRuntimes the jobs refer
// to. notes are the conversions' findings worth reading; errs name the
// file, the document and the field.
func load(source string, data []byte) (objs []*manifest, notes []string, errs []error) {
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
				objs = append(objs, &manifest{Where: where + " (converted to " + o.GetKind() + " " + o.GetName() + ")", Object: o, Converted: true})
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
				objs = append(objs, &manifest{Where: w, Object: o})
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

// setNamespace puts a manifest in the namespace of the command line:
// manifests without one get it; a different one is an error, unless the
// namespace was not given explicitly.
func setNamespace(m *manifest, namespace string, explicit bool) error {
	ns := m.Object.GetNamespace()
	switch {
	case ns == "":
		m.Object.SetNamespace(namespace)
	case ns != namespace && explicit:
		return fmt.Errorf("%s: its namespace %q does not match --namespace %q: drop one of them", m.Where, ns, namespace)
	}
	return nil
}

// checkAll asks the API server (CRD schemas, Torus's webhooks) about every
// manifest without creating anything, with strict field validation so
// that misspelt fields are named. A TrainJob whose runtime is among the
// manifests cannot be checked against it before it exists; that one
// complaint is left out.
func checkAll(ctx context.Context, c client.Client, objs []*manifest) []error {
	batch := map[string]bool{}
	for _, m := range objs {
		if m.Object.GetKind() == trainer.TrainingRuntimeKind {
			batch[m.Object.GetNamespace()+"/"+m.Object.GetName()] = true
		}
	}
	var errs []error
	for _, m := range objs {
		probe := m.Object.DeepCopy()
		err := c.Create(ctx, probe, client.DryRunAll, client.FieldOwner(fieldManager), client.FieldValidation("Strict"))
		if err == nil {
			continue
		}
		if rt, ok := batchRuntime(m, batch); ok && migrate.OnlyRuntimeMissing(err, rt) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s", m.Where, explain(err)))
	}
	return errs
}

// batchRuntime is the TrainingRuntime a TrainJob manifest refers to when
// that runtime is among the manifests.
func batchRuntime(m *manifest, batch map[string]bool) (string, bool) {
	if !m.IsTrainJob() {
		return "", false
	}
	kind, _, _ := unstructured.NestedString(m.Object.Object, "spec", "runtimeRef", "kind")
	name, _, _ := unstructured.NestedString(m.Object.Object, "spec", "runtimeRef", "name")
	return name, kind == trainer.TrainingRuntimeKind && batch[m.Object.GetNamespace()+"/"+name]
}

// explain renders an API error for people: an invalid object's causes one
// per line, field first.
func explain(err error) string {
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
