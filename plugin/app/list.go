package app

import (
	"context"
	"fmt"
	"sort"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/operator/scheme"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
	plugprinters "github.com/torus-mpi/torus/plugin/printers"
)

const listExample = `  # MPI jobs of the current namespace
  kubectl mpi list

  # Every namespace, with implementation, runtime and what each job waits for
  kubectl mpi list -A -o wide

  # For scripts: the TrainJobs as JSON
  kubectl mpi list -l team=vision -o json`

// ListOptions are the flags and clients of kubectl mpi list.
type ListOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams
	PrintFlags *genericclioptions.PrintFlags

	AllNamespaces bool
	LabelSelector string

	namespace string
	selector  labels.Selector
	client    client.Client
	printer   printers.ResourcePrinter
	clock     clock.PassiveClock
}

// NewListOptions returns list's defaults.
func NewListOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *ListOptions {
	return &ListOptions{
		getter:     getter,
		IOStreams:  streams,
		PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.New()),
		clock:      clock.RealClock{},
	}
}

func newListCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewListOptions(getter, streams)
	cmd := &cobra.Command{
		Use:     "list [-A] [-l SELECTOR] [-o wide|json|yaml|name]",
		Aliases: []string{"ls"},
		Short:   "List MPI jobs: state, workers ready, slots, queue, age",
		Example: listExample,
		Args:    exactArgs(0, "no arguments"),
		RunE:    runE(o),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List the jobs of every namespace")
	cmd.Flags().StringVarP(&o.LabelSelector, "selector", "l", "", "Label selector, e.g. team=vision")
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete reads the namespace and the client, and sets up the printer.
func (o *ListOptions) Complete(_ *cobra.Command, _ []string) error {
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
func (o *ListOptions) Validate() error {
	sel, err := mpiSelector(o.LabelSelector)
	if err != nil {
		return err
	}
	o.selector = sel
	switch *o.PrintFlags.OutputFormat {
	case "", "wide", "json", "yaml", "name":
		return nil
	}
	return cmdutil.UsageError("-o %q: use wide, json, yaml or name", *o.PrintFlags.OutputFormat)
}

// Run lists and prints.
func (o *ListOptions) Run(ctx context.Context) error {
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: o.selector}}
	if !o.AllNamespaces {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	var list trainer.TrainJobList
	if err := o.client.List(ctx, &list, opts...); err != nil {
		return fmt.Errorf("listing MPI jobs: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := &list.Items[i], &list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})

	switch *o.PrintFlags.OutputFormat {
	case "name":
		for i := range list.Items {
			if err := o.printer.PrintObj(&list.Items[i], o.Out); err != nil {
				return err
			}
		}
		return nil
	case "json", "yaml":
		list.Kind, list.APIVersion = "TrainJobList", trainer.GroupVersion.String()
		return o.printer.PrintObj(&list, o.Out)
	}

	if len(list.Items) == 0 {
		if o.AllNamespaces {
			fmt.Fprintln(o.ErrOut, "No MPI jobs found.")
		} else {
			fmt.Fprintf(o.ErrOut, "No MPI jobs found in %s namespace.\n", o.namespace)
		}
		return nil
	}
	runtimes := job.NewRuntimes(o.client)
	infos := make([]*job.Info, 0, len(list.Items))
	for i := range list.Items {
		infos = append(infos, job.Resolve(ctx, runtimes, &list.Items[i]))
	}
	return o.printer.PrintObj(plugprinters.JobTable(infos, o.clock.Now()), o.Out)
}
