package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"

	"github.com/torus-mpi/torus/plugin/migrate"
)

const (
	dryRunNone   = "none"
	dryRunServer = "server"
	// migrateFieldManager names kubectl-mpi migrate in managedFields.
	migrateFieldManager = "kubectl-mpi-migrate"
	stdinName           = "<stdin>"
	clusterSource       = "cluster"
)

var (
	mpiJobGVR          = kubeflow.SchemeGroupVersion.WithResource("mpijobs")
	trainJobGVR        = trainer.GroupVersion.WithResource("trainjobs")
	trainingRuntimeGVR = trainer.GroupVersion.WithResource("trainingruntimes")
	manifestExtensions = []string{".yaml", ".yml", ".json"}
)

const migrateLong = `Convert legacy Kubeflow MPIJobs (kubeflow.org/v2beta1, mpi-operator v0.8.2) into TrainJobs that Torus runs.

Each MPIJob becomes a TrainJob. Its launcher and worker templates go into a TrainingRuntime named after
the job, unless a ClusterTrainingRuntime Torus ships (torus-openmpi, torus-intelmpi, torus-mpich) and the
TrainJob's own fields express them (--runtime-mode=reuse, the default); --runtime-mode=generate always
generates the runtime.

Every change is reported on standard error as FILE:LINE: OBJECT: LEVEL: FIELD: MESSAGE, where LEVEL is
note, changed (a value rewritten to keep its intent), warning (no exact equivalent: what was done instead)
or error (the document was not converted). Documents that are not MPIJobs pass through unchanged.
The command exits non-zero when a document could not be converted, or with --strict when there are warnings.

See docs/migrate.md for every field mapping.`

const migrateExample = `  # Convert one manifest and read what changed
  kubectl mpi migrate -f mpijob.yaml

  # Convert a directory tree into a parallel tree of TrainJobs
  kubectl mpi migrate -f manifests/ -R --output-dir migrated/

  # Check every MPIJob of the cluster against the API server without creating anything
  kubectl mpi migrate --from-cluster -A --apply --dry-run=server

  # Fail (in CI) when any field has no exact equivalent
  kubectl mpi migrate -f manifests/ -R --strict > /dev/null`

// MigrateOptions are the flags and clients of kubectl mpi migrate.
type MigrateOptions struct {
	configFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	Filenames     []string
	Recursive     bool
	FromCluster   bool
	AllNamespaces bool
	RuntimeMode   string
	Output        string
	OutputDir     string
	Apply         bool
	DryRun        string
	Strict        bool

	mode      migrate.RuntimeMode
	format    migrate.Format
	namespace string
	client    dynamic.Interface
}

// NewMigrateOptions returns options with the defaults.
func NewMigrateOptions(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *MigrateOptions {
	return &MigrateOptions{
		configFlags: configFlags,
		IOStreams:   streams,
		RuntimeMode: string(migrate.RuntimeModeReuse),
		Output:      string(migrate.FormatYAML),
		DryRun:      dryRunNone,
	}
}

func newMigrateCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewMigrateOptions(configFlags, streams)
	cmd := &cobra.Command{
		Use:     "migrate (-f FILE|DIR|- [-R] | --from-cluster [-A]) [--runtime-mode=reuse|generate] [-o yaml|json] [--output-dir DIR] [--apply [--dry-run=server]] [--strict]",
		Short:   "Convert legacy MPIJobs (kubeflow.org/v2beta1) into TrainJobs, reporting every change",
		Long:    migrateLong,
		Example: migrateExample,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("migrate takes no arguments (got %q): give manifests with -f", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Filenames, "filename", "f", nil, "MPIJob manifests: a file, a directory (its .yaml, .yml and .json files) or - for standard input; repeatable")
	f.BoolVarP(&o.Recursive, "recursive", "R", false, "Read the directories given with -f recursively")
	f.BoolVar(&o.FromCluster, "from-cluster", false, "Read MPIJobs from the cluster (the namespace of -n or the context)")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "With --from-cluster, read MPIJobs of every namespace")
	f.StringVar(&o.RuntimeMode, "runtime-mode", o.RuntimeMode, "reuse: refer to a shipped ClusterTrainingRuntime when it expresses the job, else generate a TrainingRuntime; generate: always generate one")
	f.StringVarP(&o.Output, "output", "o", o.Output, "Output format: yaml or json")
	f.StringVar(&o.OutputDir, "output-dir", "", "Write the results into this directory, one file per input file (per MPIJob with --from-cluster), instead of standard output")
	f.BoolVar(&o.Apply, "apply", false, "Create the TrainingRuntimes and TrainJobs in the cluster (documents passed through are not created)")
	f.StringVar(&o.DryRun, "dry-run", o.DryRun, `With --apply: "server" asks the API server (and its webhooks) to check the objects without keeping them; "none" creates them`)
	f.BoolVar(&o.Strict, "strict", false, "Fail when any field has no exact equivalent (any warning)")
	return cmd
}

// Complete reads the flags into typed values and, when the cluster is
// needed, builds its client.
func (o *MigrateOptions) Complete() error {
	o.mode = migrate.RuntimeMode(o.RuntimeMode)
	o.format = migrate.Format(strings.ToLower(o.Output))
	if !o.FromCluster && !o.Apply {
		return nil
	}
	ns, _, err := o.configFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	o.namespace = ns
	cfg, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	o.client, err = dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the cluster client: %w", err)
	}
	return nil
}

// Validate refuses flag combinations that cannot mean anything.
func (o *MigrateOptions) Validate() error {
	if len(o.Filenames) == 0 && !o.FromCluster {
		return errors.New("nothing to migrate: give manifests with -f FILE|DIR|- or read the cluster's MPIJobs with --from-cluster")
	}
	if o.AllNamespaces && !o.FromCluster {
		return errors.New("-A/--all-namespaces selects the namespaces --from-cluster reads: add --from-cluster")
	}
	if o.Recursive && len(o.Filenames) == 0 {
		return errors.New("-R/--recursive applies to directories given with -f")
	}
	if !slices.Contains(migrate.RuntimeModes, o.mode) {
		return fmt.Errorf("--runtime-mode=%q: use reuse or generate", o.RuntimeMode)
	}
	if !slices.Contains(migrate.Formats, o.format) {
		return fmt.Errorf("--output=%q: use yaml or json", o.Output)
	}
	switch o.DryRun {
	case dryRunNone:
	case dryRunServer:
		if !o.Apply {
			return errors.New("--dry-run=server checks what --apply would create: add --apply (without --apply nothing is sent to the cluster)")
		}
	default:
		return fmt.Errorf("--dry-run=%q: use server (with --apply) or none", o.DryRun)
	}
	stdin := 0
	for _, f := range o.Filenames {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return errors.New("-f - (standard input) can be given once")
	}
	return nil
}

// input is one source of documents and where its results are written
// with --output-dir.
type input struct {
	items   []*migrate.Item
	outPath string
}

// Run converts, reports, writes and applies.
func (o *MigrateOptions) Run(ctx context.Context) error {
	opts := migrate.Options{RuntimeMode: o.mode}
	var inputs []input
	for _, f := range o.Filenames {
		in, err := o.readFilename(f, opts)
		if err != nil {
			return err
		}
		inputs = append(inputs, in...)
	}
	if o.FromCluster {
		in, err := o.readCluster(ctx, opts)
		if err != nil {
			return err
		}
		inputs = append(inputs, in...)
	}

	var all []*migrate.Item
	for _, in := range inputs {
		all = append(all, in.items...)
	}
	for _, it := range all {
		for _, f := range it.Findings {
			fmt.Fprintln(o.ErrOut, it.FormatFinding(f))
		}
	}

	var err error
	switch {
	case o.OutputDir != "":
		err = o.writeDir(inputs)
	case !o.Apply:
		err = migrate.Write(o.Out, all, o.format)
	}
	if err != nil {
		return err
	}
	applyFailures := 0
	if o.Apply {
		applyFailures = o.apply(ctx, all)
	}
	return o.summarize(all, applyFailures)
}

// readFilename reads one -f argument: standard input, a file, or the
// manifest files of a directory.
func (o *MigrateOptions) readFilename(name string, opts migrate.Options) ([]input, error) {
	if name == "-" {
		data, err := readAllLimited(o.In, "standard input")
		if err != nil {
			return nil, err
		}
		return []input{{items: migrate.File(stdinName, data, opts), outPath: "stdin" + o.extension(".yaml")}}, nil
	}
	st, err := os.Stat(name)
	if err != nil {
		// A missing file fails the run, not the other files.
		return []input{o.readFile(name, filepath.Base(name), opts)}, nil
	}
	if !st.IsDir() {
		return []input{o.readFile(name, filepath.Base(name), opts)}, nil
	}
	var files []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != name && !o.Recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(manifestExtensions, strings.ToLower(filepath.Ext(p))) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", name, err)
	}
	slices.Sort(files)
	out := make([]input, 0, len(files))
	for _, f := range files {
		rel, err := filepath.Rel(name, f)
		if err != nil {
			rel = filepath.Base(f)
		}
		out = append(out, o.readFile(f, rel, opts))
	}
	return out, nil
}

func (o *MigrateOptions) readFile(path, rel string, opts migrate.Options) input {
	outPath := strings.TrimSuffix(rel, filepath.Ext(rel)) + o.extension(filepath.Ext(rel))
	data, err := readFileLimited(path)
	if err != nil {
		it := &migrate.Item{Source: path, Findings: []migrate.Finding{{Level: migrate.LevelError, Message: fmt.Sprintf("reading the file: %v", err)}}}
		return input{items: []*migrate.Item{it}, outPath: outPath}
	}
	return input{items: migrate.File(path, data, opts), outPath: outPath}
}

// extension is the output file extension: the input's for YAML (.yaml or
// .yml), .json for JSON.
func (o *MigrateOptions) extension(in string) string {
	if o.format == migrate.FormatJSON {
		return ".json"
	}
	if in == ".yml" {
		return in
	}
	return ".yaml"
}

// readCluster lists MPIJobs through the dynamic client: the MPIJob CRD
// may well be gone, and its Go client is not needed.
func (o *MigrateOptions) readCluster(ctx context.Context, opts migrate.Options) ([]input, error) {
	ns := o.namespace
	where := "namespace " + ns
	if o.AllNamespaces {
		ns, where = metav1.NamespaceAll, "any namespace"
	}
	list, err := o.client.Resource(mpiJobGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("the cluster serves no MPIJobs (%s, resource %s): the MPIJob CRD of mpi-operator is not installed, so there is nothing to migrate from it; convert manifests with -f instead",
			migrate.MPIJobAPIVersion, mpiJobGVR.GroupResource())
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("listing MPIJobs in %s: %w", where, err)
	case err != nil:
		return nil, fmt.Errorf("listing MPIJobs in %s: %w", where, err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(o.ErrOut, "%s: no MPIJobs in %s\n", clusterSource, where)
	}
	out := make([]input, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		out = append(out, input{
			items:   []*migrate.Item{migrate.Object(clusterSource, u.Object, opts)},
			outPath: filepath.Join(u.GetNamespace(), u.GetName()+o.extension(".yaml")),
		})
	}
	return out, nil
}

// writeDir writes each input's results to its own file under OutputDir.
func (o *MigrateOptions) writeDir(inputs []input) error {
	written := 0
	for _, in := range inputs {
		produced := false
		for _, it := range in.items {
			outs, err := it.Outputs()
			if err != nil {
				return err
			}
			produced = produced || len(outs) > 0 || it.Blank
		}
		if !produced {
			continue
		}
		path := filepath.Join(o.OutputDir, in.outPath)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		werr := migrate.Write(f, in.items, o.format)
		if err := errors.Join(werr, f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		written++
	}
	fmt.Fprintf(o.ErrOut, "wrote %d files to %s\n", written, o.OutputDir)
	return nil
}

// apply creates each converted job's runtime and TrainJob, in that order,
// and reports each on standard output. It returns how many failed.
func (o *MigrateOptions) apply(ctx context.Context, items []*migrate.Item) int {
	dryRun := o.DryRun == dryRunServer
	opts := metav1.CreateOptions{FieldManager: migrateFieldManager}
	suffix := "created"
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
		suffix = "created (server dry run)"
	}
	failures, passed := 0, 0
	for _, it := range items {
		if !it.Converted() {
			if !it.Failed() && !it.Blank {
				passed++
			}
			continue
		}
		objs, err := it.Created()
		if err != nil {
			fmt.Fprintf(o.ErrOut, "%s: %s: %v\n", it.Source, it.Describe(), err)
			failures++
			continue
		}
		dryRunRuntime, createdRuntime := "", ""
		for _, u := range objs {
			if u.GetNamespace() == "" {
				u.SetNamespace(o.namespace)
			}
			gvr := trainJobGVR
			if u.GetKind() == trainer.TrainingRuntimeKind {
				gvr = trainingRuntimeGVR
			}
			ref := strings.ToLower(u.GetKind()) + "." + gvr.Group + "/" + u.GetName()
			err := o.create(ctx, gvr, u, opts, dryRunRuntime == "" && createdRuntime != "", createdRuntime)
			switch {
			case err == nil:
				fmt.Fprintf(o.Out, "%s %s\n", ref, suffix)
				if gvr == trainingRuntimeGVR {
					if dryRun {
						dryRunRuntime = u.GetName()
					} else {
						createdRuntime = u.GetName()
					}
				}
			case dryRun && dryRunRuntime != "" && refersToMissingRuntime(err, u, dryRunRuntime):
				// The webhook looks the runtime up, and a dry run kept none.
				fmt.Fprintf(o.Out, "%s checked (server dry run): accepted except for its runtime reference, TrainingRuntime %s, which only a real --apply creates\n", ref, dryRunRuntime)
			default:
				fmt.Fprintf(o.ErrOut, "%s: %s: creating %s in namespace %s: %v\n", it.Source, it.Describe(), ref, u.GetNamespace(), err)
				failures++
			}
		}
	}
	if passed > 0 {
		fmt.Fprintf(o.ErrOut, "%d documents passed through were not applied: apply them yourself if the jobs need them\n", passed)
	}
	return failures
}

// create creates one object. When retryMissingRuntime is set the TrainJob's
// runtime was created a moment ago, and admission webhooks that read
// runtimes from a cache may not see it yet: a refusal naming it is retried
// for a few seconds.
func (o *MigrateOptions) create(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, opts metav1.CreateOptions, retryMissingRuntime bool, runtime string) error {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 7}
	var err error
	werr := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		_, err = o.client.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, opts)
		return err == nil || !retryMissingRuntime || !refersToMissingRuntime(err, u, runtime), nil
	})
	if err == nil && werr != nil && !wait.Interrupted(werr) {
		return werr
	}
	return err
}

// refersToMissingRuntime reports whether a TrainJob was refused only
// because its (dry-run) runtime does not exist.
func refersToMissingRuntime(err error, u *unstructured.Unstructured, runtime string) bool {
	if !apierrors.IsInvalid(err) || u.GetKind() != trainer.TrainJobKind {
		return false
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		return false
	}
	causes := status.Status().Details.Causes
	if len(causes) == 0 {
		return false
	}
	want := fmt.Sprintf("%s %q not found", trainer.TrainingRuntimeKind, runtime)
	for _, c := range causes {
		if !strings.Contains(c.Message, want) {
			return false
		}
	}
	return true
}

// summarize prints the tally and turns failures (and, with --strict,
// warnings) into the command's error.
func (o *MigrateOptions) summarize(items []*migrate.Item, applyFailures int) error {
	var converted, generated, reused, passed, failed int
	for _, it := range items {
		switch {
		case it.Converted():
			converted++
			if it.Result.Runtime != nil {
				generated++
			} else {
				reused++
			}
		case it.Failed():
			failed++
		case !it.Blank:
			passed++
		}
	}
	warnings := migrate.Count(items, migrate.LevelWarning)
	fmt.Fprintf(o.ErrOut, "migrate: %d MPIJobs converted (%d runtimes generated, %d shipped runtimes used), %d documents passed through, %d failed; %d warnings, %d changes, %d notes\n",
		converted, generated, reused, passed, failed, warnings, migrate.Count(items, migrate.LevelChange), migrate.Count(items, migrate.LevelNote))
	var errs []error
	if failed > 0 {
		errs = append(errs, fmt.Errorf("%d documents could not be converted (errors above)", failed))
	}
	if applyFailures > 0 {
		errs = append(errs, fmt.Errorf("%d objects could not be created (errors above)", applyFailures))
	}
	if o.Strict && warnings > 0 {
		errs = append(errs, fmt.Errorf("--strict: %d warnings, fields without an exact equivalent (listed above)", warnings))
	}
	return errors.Join(errs...)
}
