package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
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

See docs/users/migrate.md for every field mapping.`

const migrateExample = `  # Convert one manifest and read what changed
  kubectl mpi migrate -f mpijob.yaml

  # Convert a directory tree into a parallel tree of TrainJobs
  kubectl mpi migrate -f manifests/ -R --output-dir migrated/

  # Check every MPIJob of the cluster against the API server without creating anything
  kubectl mpi migrate --from-cluster -A --apply --dry-run=server

  # Fail (in CI) when any field has no exact equivalent
  kubectl mpi migrate -f manifests/ -R --strict > /dev/null`

// migrateOptions are the flags and clients of kubectl mpi migrate.
type migrateOptions struct {
	getter plugclient.Getter
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

	mode      RuntimeMode
	format    outputFormat
	namespace string
	client    dynamic.Interface
}

// newMigrateOptions returns options with the defaults.
func newMigrateOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *migrateOptions {
	return &migrateOptions{
		getter:      getter,
		IOStreams:   streams,
		RuntimeMode: string(RuntimeModeReuse),
		Output:      string(formatYAML),
		DryRun:      cmdutil.DryRunNone,
	}
}

// NewCmd returns kubectl mpi migrate.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newMigrateOptions(getter, streams)
	cmd := &cobra.Command{
		Use:     "migrate (-f FILE|DIR|- [-R] | --from-cluster [-A]) [--runtime-mode=reuse|generate] [-o yaml|json] [--output-dir DIR] [--apply [--dry-run=server]] [--strict]",
		Short:   "Convert legacy MPIJobs (kubeflow.org/v2beta1) into TrainJobs, reporting every change",
		Long:    migrateLong,
		Example: migrateExample,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.UsageError("migrate takes no arguments (got %q): give manifests with -f", args)
			}
			return nil
		},
		RunE: cmdutil.RunE(o),
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Filenames, "filename", "f", nil, "MPIJob manifests: a file, a directory (its .yaml, .yml and .json files) or - for standard input; repeatable")
	f.BoolVarP(&o.Recursive, "recursive", "R", false, "Read the directories given with -f recursively")
	f.BoolVar(&o.FromCluster, "from-cluster", false, "Read MPIJobs from the cluster (the namespace of -n or the context)")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "With --from-cluster, read MPIJobs of every namespace")
	f.StringVar(&o.RuntimeMode, "runtime-mode", o.RuntimeMode, "reuse: refer to a shipped ClusterTrainingRuntime when it expresses the job, else generate a TrainingRuntime; generate: always generate one")
	f.StringVarP(&o.Output, "output", "o", o.Output, "Output format: yaml or json")
	f.StringVar(&o.OutputDir, "output-dir", "", "Write the results into this directory (created if missing), one file per input file (per MPIJob with --from-cluster), instead of standard output; nothing is written if two inputs would share a file or a result would replace an input")
	f.BoolVar(&o.Apply, "apply", false, "Create the TrainingRuntimes and TrainJobs in the cluster (documents passed through are not created)")
	f.StringVar(&o.DryRun, "dry-run", o.DryRun, `With --apply: "server" asks the API server (and its webhooks) to check the objects without keeping them; "none" creates them`)
	f.BoolVar(&o.Strict, "strict", false, "Fail when any field has no exact equivalent (any warning)")
	return cmd
}

// Complete reads the flags into typed values and, when the cluster is
// needed, the namespace and the client: converting files needs no cluster.
func (o *migrateOptions) Complete(_ *cobra.Command, _ []string) error {
	o.mode = RuntimeMode(o.RuntimeMode)
	o.format = outputFormat(strings.ToLower(o.Output))
	if !o.FromCluster && !o.Apply {
		return nil
	}
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	if _, err = o.getter.RESTConfig(); err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	o.client, err = o.getter.Dynamic()
	return err
}

// Validate refuses flag combinations that cannot mean anything.
func (o *migrateOptions) Validate() error {
	if len(o.Filenames) == 0 && !o.FromCluster {
		return cmdutil.UsageError("nothing to migrate: give manifests with -f FILE|DIR|- or read the cluster's MPIJobs with --from-cluster")
	}
	if o.AllNamespaces && !o.FromCluster {
		return cmdutil.UsageError("-A/--all-namespaces selects the namespaces --from-cluster reads: add --from-cluster")
	}
	if o.Recursive && len(o.Filenames) == 0 {
		return cmdutil.UsageError("-R/--recursive applies to directories given with -f")
	}
	if !slices.Contains(RuntimeModes, o.mode) {
		return cmdutil.UsageError("--runtime-mode=%q: use reuse or generate", o.RuntimeMode)
	}
	if !slices.Contains(outputFormats, o.format) {
		return cmdutil.UsageError("--output=%q: use yaml or json", o.Output)
	}
	switch o.DryRun {
	case cmdutil.DryRunNone:
	case cmdutil.DryRunServer:
		if !o.Apply {
			return cmdutil.UsageError("--dry-run=server checks what --apply would create: add --apply (without --apply nothing is sent to the cluster)")
		}
	default:
		return cmdutil.UsageError("--dry-run=%q: use server (with --apply) or none", o.DryRun)
	}
	return cmdutil.StdinOnce(o.Filenames)
}

// Run converts, reports, writes and applies.
func (o *migrateOptions) Run(ctx context.Context) error {
	r := &migration{
		Filenames: o.Filenames, Recursive: o.Recursive, FromCluster: o.FromCluster,
		Format: o.format, Options: Options{RuntimeMode: o.mode},
		OutputDir: o.OutputDir, Apply: o.Apply, Strict: o.Strict,
		Cluster: &cluster{Client: o.client, Namespace: o.namespace, AllNamespaces: o.AllNamespaces,
			DryRun: o.DryRun == cmdutil.DryRunServer, Out: o.Out, ErrOut: o.ErrOut},
		In: o.In, Out: o.Out, ErrOut: o.ErrOut,
	}
	return r.Do(ctx)
}
