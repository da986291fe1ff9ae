package describe

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
)

const describeExample = `  # Why is it pending, which rank failed and what to change
  kubectl mpi describe pi`

// describeOptions are the flags and clients of kubectl mpi describe.
type describeOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	name      string
	namespace string
	client    client.Client
	clock     clock.PassiveClock
}

// newDescribeOptions returns describe's defaults.
func newDescribeOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *describeOptions {
	return &describeOptions{getter: getter, IOStreams: streams, clock: clock.RealClock{}}
}

// NewCmd returns kubectl mpi describe.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newDescribeOptions(getter, streams)
	return &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show a job's state, why it waits or failed (rank, cause, fix), its ranks, conditions and events",
		Example:           describeExample,
		Args:              cmdutil.ExactArgs(1, "one job name"),
		ValidArgsFunction: cmdutil.CompleteJobNames(getter, 1),
		RunE:              cmdutil.RunE(o),
	}
}

// Complete reads NAME, the namespace and the client.
func (o *describeOptions) Complete(_ *cobra.Command, args []string) error {
	var err error
	o.name, o.namespace, o.client, err = cmdutil.CompleteJob(o.getter, args)
	return err
}

// Validate has nothing to check: exactArgs took the one name.
func (o *describeOptions) Validate() error { return nil }

// Run describes the job.
func (o *describeOptions) Run(ctx context.Context) error {
	tj, err := job.Get(ctx, o.client, o.namespace, o.name)
	if err != nil {
		return err
	}
	kube, err := o.getter.Kubernetes()
	if err != nil {
		return err
	}
	now := o.clock.Now()
	return write(o.Out, gather(ctx, o.client, job.NewPodTables(kube), tj, now), now)
}
