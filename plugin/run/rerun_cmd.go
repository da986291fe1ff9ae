package run

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
)

const rerunLong = `Run a job again with the same configuration, or clone it and change some of it: the job's spec is
copied (without what Kueue decided for the old run), the flags given override it (any flag of run, and
a new command after --), and it is submitted under a new name: --name, or NAME-2, NAME-3, … The new job
records where it came from in the annotation torus-mpi.io/rerun-of, which describe shows.`

const rerunExample = `  # Retry a failed job as it was
  kubectl mpi rerun pi

  # Clone it with more memory and 8 workers, and wait for the result
  kubectl mpi rerun pi --name pi-big --memory 32Gi --workers 8 --wait`

// rerunOptions are the flags and clients of kubectl mpi rerun.
type rerunOptions struct {
	*runOptions
	NewName string
}

// newRerunOptions returns rerun's defaults: run's, with the job taken from
// an existing one.
func newRerunOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *rerunOptions {
	o := &rerunOptions{runOptions: newRunOptions(getter, streams)}
	o.rerun = true
	return o
}

// NewRerunCmd returns kubectl mpi rerun: run's flags, taken as overrides of
// an existing job, and --name.
func NewRerunCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newRerunOptions(getter, streams)
	cmd := &cobra.Command{
		Use:               "rerun NAME [--name NEW] [run flags] [-- COMMAND [ARGS...]]",
		Short:             "Run a job again, or a modified copy of it, under a new name",
		Long:              rerunLong,
		Example:           rerunExample,
		ValidArgsFunction: cmdutil.CompleteJobNames(getter, 1),
		RunE:              cmdutil.RunE(o),
	}
	addJobFlags(cmd.Flags(), &o.Job)
	o.addRunFlags(cmd)
	cmd.Flags().StringVar(&o.NewName, "name", "", "Name of the new job (default NAME-2, NAME-3, …)")
	return cmd
}

// Validate checks that a job is named, then the flags as run does.
func (o *rerunOptions) Validate() error {
	if o.name == "" {
		return cmdutil.UsageError("rerun needs the name of the job to run again")
	}
	return o.runOptions.Validate()
}

// Run copies, overrides and submits.
func (o *rerunOptions) Run(ctx context.Context) error {
	orig, err := job.Get(ctx, o.client, o.namespace, o.name)
	if err != nil {
		return err
	}
	name := o.NewName
	if name == "" {
		var list trainer.TrainJobList
		if err := o.client.List(ctx, &list, client.InNamespace(o.namespace)); err != nil {
			return fmt.Errorf("listing jobs to name the rerun: %w", err)
		}
		taken := sets.New[string]()
		for _, tj := range list.Items {
			taken.Insert(tj.Name)
		}
		name = nextName(orig, taken.Has)
	}
	spec, err := o.Job.Spec(name, o.namespace, o.command, o.changed)
	if err != nil {
		return cmdutil.AsUsage(err)
	}
	if o.changed(flagMPI) && !o.changed(flagRuntime) {
		// Another implementation means its runtime.
		spec.Runtime, spec.RuntimeKind = spec.Implementation.RuntimeName(), trainer.ClusterTrainingRuntimeKind
	}

	clone := cloneJob(orig, name)
	// A job that ran on its own copy of a runtime (api.AnnotationRuntimeCopyOf)
	// reruns on the runtime it copied, with the copy's volumes in its
	// runtime patch (and any new ones).
	if kind := ptr.Deref(orig.Spec.RuntimeRef.Kind, ""); kind == trainer.TrainingRuntimeKind {
		var rt trainer.TrainingRuntime
		if err := o.client.Get(ctx, client.ObjectKey{Namespace: orig.Namespace, Name: orig.Spec.RuntimeRef.Name}, &rt); err == nil {
			if base, copied, ok := copiedRuntime(rt.Annotations, &rt.Spec); ok {
				clone.Spec.RuntimeRef = base
				spec.Volumes = append(copied, spec.Volumes...)
			}
		}
	}
	spec.Apply(clone)
	plan, err := check(ctx, o.client, clone, spec.Implementation, true, patchedVolumes(clone))
	if err != nil {
		return err
	}
	return o.submit(ctx, plan)
}
