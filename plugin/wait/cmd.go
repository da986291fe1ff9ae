package wait

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/printers"
)

const waitExample = `  # Block until the job completes; exit 3 (with the failure) if it fails, 4 after 1h
  kubectl mpi wait pi --for=condition=Complete --timeout 1h

  # Block until the launcher and every worker run
  kubectl mpi wait pi --for=condition=Running`

// waitOptions are the flags and clients of kubectl mpi wait.
type waitOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	For     string
	Timeout time.Duration

	name      string
	namespace string
	cond      Condition
	client    client.WithWatch
	clock     clock.WithTicker
}

// newWaitOptions returns wait's defaults.
func newWaitOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *waitOptions {
	return &waitOptions{getter: getter, IOStreams: streams, For: "condition=Complete", clock: clock.RealClock{}}
}

// NewCmd returns kubectl mpi wait.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newWaitOptions(getter, streams)
	cmd := &cobra.Command{
		Use:   "wait NAME --for=condition=Complete|Failed|Running [--timeout D]",
		Short: "Wait for a job to complete, fail or run",
		Long: `Wait for a job to reach a condition. Exit codes: 0 when it does; 3 when the job ended in a way that
rules it out (it failed while waiting for Complete or Running, or completed while waiting for Failed; the
failure is printed); 4 when --timeout passed first; 1 when the job does not exist or was deleted, and at
once when the Torus operator is not running (its leader lease is stale), since the job cannot progress.
A job that completed counts as having run (Running).`,
		Example:           waitExample,
		Args:              cmdutil.ExactArgs(1, "one job name"),
		ValidArgsFunction: cmdutil.CompleteJobNames(getter, 1),
		RunE:              cmdutil.RunE(o),
	}
	cmd.Flags().StringVar(&o.For, "for", o.For, "condition=Complete, condition=Failed or condition=Running")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "Give up after this long (exit 4); 0 waits forever")
	return cmd
}

// Complete reads NAME, the namespace and the client.
func (o *waitOptions) Complete(_ *cobra.Command, args []string) error {
	var err error
	o.name, o.namespace, o.client, err = cmdutil.CompleteJob(o.getter, args)
	return err
}

// Validate reads --for.
func (o *waitOptions) Validate() error {
	cond, err := parseFor(o.For)
	if err != nil {
		return cmdutil.AsUsage(err)
	}
	o.cond = cond
	if o.Timeout < 0 {
		return cmdutil.UsageError("--timeout=%s cannot be negative", o.Timeout)
	}
	return nil
}

// Run waits.
func (o *waitOptions) Run(ctx context.Context) error {
	w := &Waiter{Client: o.client, ErrOut: o.ErrOut, Clock: o.clock, Timeout: o.Timeout}
	tj, err := w.Until(ctx, o.namespace, o.name, o.cond)
	if err != nil {
		return err
	}
	return printers.PrintName(o.Out, tj, fmt.Sprintf("condition met: %s", o.cond))
}
