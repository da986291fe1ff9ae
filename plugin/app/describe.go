package app

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/describe"
	"github.com/torus-mpi/torus/plugin/job"
)

const describeExample = `  # Why is it pending, which rank failed and what to change
  kubectl mpi describe pi`

// DescribeOptions are the flags and clients of kubectl mpi describe.
type DescribeOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	name      string
	namespace string
	clock     clock.PassiveClock
}

func newDescribeCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DescribeOptions{getter: getter, IOStreams: streams, clock: clock.RealClock{}}
	cmd := &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show a job's state, why it waits or failed (rank, cause, fix), its ranks, conditions and events",
		Example:           describeExample,
		Args:              exactArgs(1, "one job name"),
		ValidArgsFunction: completeJobNames(getter, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.name = args[0]
			var err error
			if o.namespace, err = getter.Namespace(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	return cmd
}

// Run describes the job.
func (o *DescribeOptions) Run(ctx context.Context) error {
	c, err := o.getter.Client()
	if err != nil {
		return err
	}
	tj, err := job.Get(ctx, c, o.namespace, o.name)
	if err != nil {
		return err
	}
	now := o.clock.Now()
	return describe.Write(o.Out, describe.Gather(ctx, c, tj, now), now)
}
