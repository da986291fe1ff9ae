package app

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
)

// command is the shape of every kubectl-mpi command, kubectl's: Complete
// reads the command line, the namespace and the clients and sets up
// printers; Validate checks the command line without I/O; Run does the
// work.
type command interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// runE runs a command's three steps in order, as cobra's RunE.
func runE(o command) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}

// completeJob reads what a command about one job completes with: its NAME
// argument, the namespace and the client.
func completeJob(g plugclient.Getter, args []string) (name, namespace string, c client.WithWatch, err error) {
	if namespace, err = g.Namespace(); err != nil {
		return "", "", nil, err
	}
	c, err = g.Client()
	return args[0], namespace, c, err
}

// mpiSelector selects MPI TrainJobs within a user's -l selector.
func mpiSelector(user string) (labels.Selector, error) {
	sel, err := job.Selector(user)
	if err != nil {
		return nil, cmdutil.UsageError("-l %q: %v", user, err)
	}
	return sel, nil
}

// completeJobNames completes MPI job names in the command line's namespace.
func completeJobNames(getter plugclient.Getter, maxArgs int) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if maxArgs >= 0 && len(args) >= maxArgs {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names, err := jobNames(cmd.Context(), getter)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) && !contains(args, n) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func jobNames(ctx context.Context, getter plugclient.Getter) ([]string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := getter.Client()
	if err != nil {
		return nil, err
	}
	ns, err := getter.Namespace()
	if err != nil {
		return nil, err
	}
	jobs, err := job.List(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(jobs))
	for _, tj := range jobs {
		names = append(names, tj.Name)
	}
	sort.Strings(names)
	return names, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// exactArgs is cobra.ExactArgs with a usage error naming what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if cmd.ArgsLenAtDash() >= 0 {
			args = args[:cmd.ArgsLenAtDash()]
		}
		if len(args) != n {
			return cmdutil.UsageError("%s takes %s (got %d arguments): see kubectl mpi %s --help", cmd.Name(), what, len(args), cmd.Name())
		}
		return nil
	}
}

func warn(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "Warning: "+format+"\n", args...)
}

// printName prints "trainjob.trainer.kubeflow.org/NAME OPERATION", as
// kubectl delete and wait do, with cli-runtime's NamePrinter.
func printName(w io.Writer, tj *trainer.TrainJob, operation string) error {
	obj := tj.DeepCopy()
	obj.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	return (&printers.NamePrinter{Operation: operation}).PrintObj(obj, w)
}
