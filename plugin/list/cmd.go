package list

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/scheme"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
)

const listExample = `  # MPI jobs of the current namespace
  kubectl mpi list

  # Every namespace, with implementation, runtime and what each job waits for
  kubectl mpi list -A -o wide

  # For scripts: the TrainJobs as JSON
  kubectl mpi list -l team=vision -o json`

// listOptions are the flags and clients of kubectl mpi list.
type listOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams
	PrintFlags *genericclioptions.PrintFlags

	AllNamespaces bool
	LabelSelector string
	// ChunkSize: jobs asked of the API server a request (kubectl get's
	// --chunk-size), so that no single response holds every job of a big
	// cluster; 0 asks for all at once.
	ChunkSize int64

	namespace string
	selector  labels.Selector
	client    client.Client
	printer   printers.ResourcePrinter
	clock     clock.PassiveClock
}

// newListOptions returns list's defaults.
func newListOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *listOptions {
	return &listOptions{
		getter:     getter,
		IOStreams:  streams,
		PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.New()),
		ChunkSize:  500,
		clock:      clock.RealClock{},
	}
}

// NewCmd returns kubectl mpi list.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newListOptions(getter, streams)
	cmd := &cobra.Command{
		Use:     "list [-A] [-l SELECTOR] [-o wide|json|yaml|name]",
		Aliases: []string{"ls"},
		Short:   "List MPI jobs: state, workers ready, slots, queue, age",
		Example: listExample,
		Args:    cmdutil.ExactArgs(0, "no arguments"),
		RunE:    cmdutil.RunE(o),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List the jobs of every namespace")
	cmd.Flags().StringVarP(&o.LabelSelector, "selector", "l", "", "Label selector, e.g. team=vision")
	cmd.Flags().Int64Var(&o.ChunkSize, "chunk-size", o.ChunkSize, "Jobs to ask the API server for in each request, so a big cluster is read in pages; 0 reads all in one request")
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete reads the namespace and the client, and sets up the printer.
func (o *listOptions) Complete(_ *cobra.Command, _ []string) error {
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	if o.client, err = o.getter.Client(); err != nil {
		return err
	}
	switch *o.PrintFlags.OutputFormat {
	case "json", "yaml", "name":
		if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
			return err
		}
	case "", "wide":
		o.printer = printers.NewTablePrinter(printers.PrintOptions{
			WithNamespace: o.AllNamespaces,
			Wide:          *o.PrintFlags.OutputFormat == "wide",
		})
	}
	// Any other -o is Validate's to refuse.
	return nil
}

// Validate checks -l and -o.
func (o *listOptions) Validate() error {
	sel, err := mpiSelector(o.LabelSelector)
	if err != nil {
		return err
	}
	o.selector = sel
	if o.ChunkSize < 0 {
		return cmdutil.UsageError("--chunk-size %d: use a positive number, or 0 for one request", o.ChunkSize)
	}
	switch *o.PrintFlags.OutputFormat {
	case "", "wide", "json", "yaml", "name":
		return nil
	}
	return cmdutil.UsageError("-o %q: use wide, json, yaml or name", *o.PrintFlags.OutputFormat)
}

// Run lists and prints, a page at a time: the API server returns jobs in
// namespace and name order, and table rows go through one tab writer, so
// that columns line up across pages as in kubectl get.
func (o *listOptions) Run(ctx context.Context) error {
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: o.selector}, client.Limit(o.ChunkSize)}
	if !o.AllNamespaces {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	format := *o.PrintFlags.OutputFormat
	out := printers.GetNewTabWriter(o.Out)
	runtimes := job.NewRuntimes(o.client)
	all := trainer.TrainJobList{Items: []trainer.TrainJob{}} // -o json|yaml print one list
	found := 0
	for cont := ""; ; {
		var page trainer.TrainJobList
		if err := o.client.List(ctx, &page, append(opts, client.Continue(cont))...); err != nil {
			return fmt.Errorf("listing MPI jobs: %w", err)
		}
		found += len(page.Items)
		switch format {
		case "json", "yaml":
			all.Items = append(all.Items, page.Items...)
		case "name":
			for i := range page.Items {
				if err := o.printer.PrintObj(&page.Items[i], out); err != nil {
					return err
				}
			}
		default:
			if len(page.Items) == 0 {
				break
			}
			infos := make([]*job.Info, 0, len(page.Items))
			for i := range page.Items {
				infos = append(infos, job.Resolve(ctx, runtimes, &page.Items[i]))
			}
			if err := o.printer.PrintObj(jobTable(infos, o.clock.Now()), out); err != nil {
				return err
			}
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	if format == "json" || format == "yaml" {
		all.Kind, all.APIVersion = "TrainJobList", trainer.GroupVersion.String()
		if err := o.printer.PrintObj(&all, out); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if found == 0 && (format == "" || format == "wide") {
		if o.AllNamespaces {
			fmt.Fprintln(o.ErrOut, "No MPI jobs found.")
		} else {
			fmt.Fprintf(o.ErrOut, "No MPI jobs found in %s namespace.\n", o.namespace)
		}
	}
	return nil
}

// mpiSelector selects MPI TrainJobs within a user's -l selector.
func mpiSelector(user string) (labels.Selector, error) {
	sel, err := job.Selector(user)
	if err != nil {
		return nil, cmdutil.UsageError("-l %q: %v", user, err)
	}
	return sel, nil
}
