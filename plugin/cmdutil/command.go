package cmdutil

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/job"
)

// Command is the shape of every kubectl-mpi command, kubectl's: Complete
// reads the command line, the namespace and the clients and sets up
// printers; Validate checks the command line without I/O; Run does the
// work.
type Command interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// RunE runs a command's three steps in order, as cobra's RunE.
func RunE(o Command) func(*cobra.Command, []string) error {
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

// ExactArgs is cobra.ExactArgs with a usage error naming what is missing.
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if cmd.ArgsLenAtDash() >= 0 {
			args = args[:cmd.ArgsLenAtDash()]
		}
		if len(args) != n {
			return UsageError("%s takes %s (got %d arguments): see kubectl mpi %s --help", cmd.Name(), what, len(args), cmd.Name())
		}
		return nil
	}
}

// CompleteJob reads what a command about one job completes with: its NAME
// argument, the namespace and the client.
func CompleteJob(g plugclient.Getter, args []string) (name, namespace string, c client.WithWatch, err error) {
	if namespace, err = g.Namespace(); err != nil {
		return "", "", nil, err
	}
	c, err = g.Client()
	return args[0], namespace, c, err
}

// CompleteJobNames completes MPI job names in the command line's
// namespace, up to maxArgs names (-1: any number).
func CompleteJobNames(getter plugclient.Getter, maxArgs int) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
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
			if strings.HasPrefix(n, toComplete) && !slices.Contains(args, n) {
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
