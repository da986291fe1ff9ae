// Package delete is kubectl mpi delete: it deletes MPI jobs in the
// foreground, so that their JobSet and pods go first, and with --wait waits
// until nothing of them is left.
package delete

import (
	"context"
	"errors"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/printers"
	"github.com/torus-mpi/torus/plugin/wait"
)

const deleteExample = `  # Delete two jobs (their pods, JobSet, keys and hostfile go with them)
  kubectl mpi delete pi train

  # Delete every MPI job of the namespace and wait until they are gone
  kubectl mpi delete --all --wait`

// deleteOptions are the flags and clients of kubectl mpi delete.
type deleteOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	All     bool
	Wait    bool
	Timeout time.Duration

	names     []string
	namespace string
	client    client.WithWatch
}

// newDeleteOptions returns delete's defaults.
func newDeleteOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *deleteOptions {
	return &deleteOptions{getter: getter, IOStreams: streams}
}

// NewCmd returns kubectl mpi delete.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newDeleteOptions(getter, streams)
	cmd := &cobra.Command{
		Use:               "delete NAME... | --all [--wait]",
		Short:             "Delete MPI jobs with everything they own",
		Example:           deleteExample,
		ValidArgsFunction: cmdutil.CompleteJobNames(getter, -1),
		RunE:              cmdutil.RunE(o),
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "Delete every MPI job of the namespace")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "Wait until the jobs are gone")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "With --wait, give up after this long (exit 4); 0 waits forever")
	return cmd
}

// Complete reads the names, the namespace and the client.
func (o *deleteOptions) Complete(_ *cobra.Command, args []string) error {
	o.names = args
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	o.client, err = o.getter.Client()
	return err
}

// Validate checks that jobs are named one way.
func (o *deleteOptions) Validate() error {
	switch {
	case o.All && len(o.names) > 0:
		return cmdutil.UsageError("--all deletes every MPI job of the namespace: drop the names %q, or drop --all", o.names)
	case !o.All && len(o.names) == 0:
		return cmdutil.UsageError("name the jobs to delete, or give --all")
	case o.Timeout != 0 && !o.Wait:
		return cmdutil.UsageError("--timeout bounds --wait: add --wait")
	}
	return nil
}

// Run deletes.
func (o *deleteOptions) Run(ctx context.Context) error {
	c := o.client
	var jobs []*trainer.TrainJob
	var errs []error
	if o.All {
		var err error
		if jobs, err = job.List(ctx, c, o.namespace); err != nil {
			return err
		}
		if len(jobs) == 0 {
			fmt.Fprintf(o.ErrOut, "No MPI jobs found in %s namespace.\n", o.namespace)
			return nil
		}
	} else {
		for _, name := range o.names {
			tj, err := job.Get(ctx, c, o.namespace, name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			jobs = append(jobs, tj)
		}
	}
	var deleted []*trainer.TrainJob
	for _, tj := range jobs {
		// Foreground: the JobSet and pods go first, so that --wait ends
		// when nothing of the job is left.
		err := c.Delete(ctx, tj, client.PropagationPolicy("Foreground"))
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("deleting MPI job %s: %w", tj.Name, err))
			continue
		}
		deleted = append(deleted, tj)
		if err := printers.PrintName(o.Out, tj, "deleted"); err != nil {
			return err
		}
	}
	if o.Wait {
		if err := wait.Deleted(ctx, c, o.ErrOut, deleted, o.Timeout); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}
