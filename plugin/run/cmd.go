package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/scheme"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/wait"
)

var runLong = `Run an MPI job: a launcher that starts mpirun and workers that run the ranks, as a Kubeflow Trainer
TrainJob that the Torus operator runs.

The runtime follows --mpi (` + strings.Join(mpi.CLINames(), ", ") + `; Torus's ClusterTrainingRuntimes
` + strings.Join(mpi.RuntimeNames(), ", ") + `) unless --runtime names one.
The command after -- is the launcher's; workers run sshd as the runtime says. --env sets the TrainJob's
environment, which reaches the launcher and every worker; --volume, --image-pull-secret and
--service-account reach their pods through the TrainJob's runtimePatches (manager ` + patchManager + `), on
the runtime as it is.

Before anything is submitted the job is checked: flag values, the runtime (it exists and runs the MPI asked
for), host name lengths, volumes, and with --queue that the LocalQueue exists and that its ClusterQueue's
quota can ever hold the whole job (Kueue admits all pods at once or none).

With -f, the TrainJobs of files (YAML or JSON; TrainJobs, TrainingRuntimes they use, and MPIJobs that
kubectl mpi migrate converts) are all checked by the API server (CRD schema, Torus's webhooks) with a
server-side dry run before any is created; errors name the file, the document and the field.

--wait exits 0 when the job completes and 3 when it fails, printing why; --follow streams the logs of all
pods until the job ends and exits the same way. --timeout bounds both (exit 4). Both stop at once (exit 1)
when the Torus operator is not running (its leader lease is stale), since the job cannot progress.`

const runExample = `  # 4 workers, 2 ranks each, Open MPI 4
  kubectl mpi run pi --image mpioperator/mpi-pi:openmpi --workers 4 --slots-per-worker 2 -- mpirun -n 8 /home/mpiuser/pi

  # Intel MPI on GPUs through a Kueue queue, and wait for the result
  kubectl mpi run train --mpi intel --image registry/train:1 --workers 8 --gpus 4 --memory 64Gi \
    --queue team-a --topology cloud.provider.com/topology-rack --wait -- mpirun ./train

  # Data from a PersistentVolumeClaim, an image from a private registry, a ServiceAccount of its own
  kubectl mpi run train --image registry.example.com/team/train:1 --image-pull-secret registry \
    --service-account trainer --volume pvc:datasets:/data:ro --env EPOCHS=3 -- mpirun ./train

  # See what would be submitted, checked by the API server
  kubectl mpi run pi --image img --dry-run=server -o yaml -- mpirun ./pi

  # Submit the TrainJobs (or legacy MPIJobs) of a file and follow their logs
  kubectl mpi run -f job.yaml --follow`

// runOptions are the flags and clients of kubectl mpi run.
type runOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams
	PrintFlags *genericclioptions.PrintFlags

	Job       jobFlags
	Filenames []string
	DryRun    string
	Wait      bool
	Follow    bool
	Timeout   time.Duration

	names     []string
	name      string
	command   []string
	namespace string
	// explicitNS: -n was given, so manifests in other namespaces are an
	// error.
	explicitNS bool
	changed    func(string) bool
	// rerun: the job comes from an existing one; flags only override.
	rerun   bool
	printer printers.ResourcePrinter
	client  client.WithWatch
	kube    kubernetes.Interface
	clock   clock.WithTicker
}

// newRunOptions returns run's defaults.
func newRunOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *runOptions {
	return &runOptions{
		getter:     getter,
		IOStreams:  streams,
		PrintFlags: genericclioptions.NewPrintFlags("created").WithTypeSetter(scheme.New()),
		DryRun:     cmdutil.DryRunNone,
		clock:      clock.RealClock{},
	}
}

// NewCmd returns kubectl mpi run.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newRunOptions(getter, streams)
	cmd := &cobra.Command{
		Use:     "run NAME --image IMAGE [flags] -- COMMAND [ARGS...] | run -f FILE|- [flags]",
		Short:   "Run an MPI job",
		Long:    runLong,
		Example: runExample,
		RunE:    cmdutil.RunE(o),
	}
	addJobFlags(cmd.Flags(), &o.Job)
	o.addRunFlags(cmd)
	cmd.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Files of TrainJobs or MPIJobs to run (YAML or JSON; - for standard input)")
	return cmd
}

// addJobFlags binds the flags that shape a job; rerun takes them as
// overrides.
func addJobFlags(f *pflag.FlagSet, j *jobFlags) {
	f.StringVar(&j.Image, flagImage, "", "Container image of the launcher and the workers")
	f.Int32Var(&j.Workers, flagWorkers, 0, "Number of workers (MPI nodes); the runtime's when not set")
	f.Int32Var(&j.SlotsPerWorker, flagSlotsPerWorker, 0, "MPI ranks per worker; the runtime's when not set (one per GPU with --gpus)")
	f.Int64Var(&j.GPUs, flagGPUs, 0, "GPUs per worker")
	f.StringVar(&j.GPUResource, flagGPUResource, "", "Extended resource --gpus requests (default nvidia.com/gpu)")
	f.StringVar(&j.CPU, flagCPU, "", "CPU per worker, requested and limited (e.g. 4, 500m)")
	f.StringVar(&j.Memory, flagMemory, "", "Memory per worker, requested and limited (e.g. 16Gi)")
	f.StringVar(&j.MPI, flagMPI, "", "MPI implementation: "+strings.Join(mpi.CLINames(), ", ")+" (default "+mpi.OpenMPI.CLIName()+"); picks the runtime unless --runtime is set")
	f.StringVar(&j.Runtime, flagRuntime, "", "Runtime: NAME of a ClusterTrainingRuntime, or TrainingRuntime/NAME in the job's namespace")
	f.StringVar(&j.Queue, flagQueue, "", "Kueue LocalQueue that admits the whole job at once")
	f.StringVar(&j.Priority, flagPriority, "", "Kueue WorkloadPriorityClass of the job (label kueue.x-k8s.io/priority-class): in its queue a job of higher priority is admitted first, and may preempt one of lower")
	f.StringVar(&j.Network, flagNetwork, "", "MPINetworkProfile for InfiniBand/RoCE (annotation torus-mpi.io/network-profile)")
	f.StringVar(&j.Topology, flagTopology, "", "Node label whose domain all pods must share, e.g. cloud.provider.com/topology-rack")
	f.StringVar(&j.SchedulingTimeout, flagSchedTimeout, "", "Fail the job if its ranks have not all run this long after it started (e.g. 10m); time queued in Kueue does not count")
	f.StringVar(&j.Checkpoint, flagCheckpoint, "", "CLAIM[:PATH]: a ReadWriteMany PersistentVolumeClaim mounted in the launcher and every worker (at "+mpi.DefaultCheckpointDir+" by default), for the checkpoints a restarted job resumes from; the program finds it in $"+mpi.EnvCheckpointDir+", and its run in $"+mpi.EnvRunAttempt)
	f.StringVar(&j.MaxRestarts, flagMaxRestarts, "", fmt.Sprintf("Start the whole job again, up to this many times (0 to %d), when its program fails; a pod evicted, preempted or lost with its node restarts it without counting (default: the runtime's failurePolicy.maxRestarts, else 0)", mpi.MaxRestarts))
	f.StringVar(&j.TerminationGracePeriod, flagGracePeriod, "", fmt.Sprintf("How long every rank has from SIGTERM to write a checkpoint and exit when the job is stopped, preempted or restarted, whole seconds up to %s (e.g. 5m; default: the runtime's, else 30s)", mpi.MaxTerminationGracePeriod))
	f.StringVar(&j.StallTimeout, flagStallTimeout, "", fmt.Sprintf("Fail the running job when its launcher prints nothing this long (%s to %s, e.g. 30m): a rank that raised while the others wait in a collective never ends by itself (default: the runtime's, else never)", mpi.MinStallTimeout, mpi.MaxStallTimeout))
	f.StringArrayVar(&j.Env, flagEnv, nil, "Environment variable NAME=VALUE for the launcher and the workers (repeatable)")
	f.StringArrayVar(&j.Volumes, flagVolume, nil, "PersistentVolumeClaim to mount into the launcher and the workers: pvc:CLAIM:/path[:ro] (repeatable)")
	f.StringArrayVar(&j.ImagePullSecrets, flagPullSecret, nil, "Secret the kubelet pulls the image with, in the job's namespace (repeatable)")
	f.StringVar(&j.ServiceAccount, flagServiceAccount, "", "ServiceAccount the launcher's and the workers' pods run as; the runtime's when not set")
	f.StringVar(&j.Launch, flagLaunch, "", "How ranks are launched: agent (Torus's launch agent; the image needs MPI and no OpenSSH) or openssh (the image's sshd and ssh); the runtime's when not set")
}

// addRunFlags binds the flags of how a job is submitted and waited for.
func (o *runOptions) addRunFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.DryRun, "dry-run", o.DryRun, `"none" submits; "client" only prints the job; "server" has the API server and webhooks check it without keeping it`)
	f.Lookup("dry-run").NoOptDefVal = cmdutil.DryRunClient
	f.BoolVar(&o.Wait, "wait", false, "Wait for the job to end: exit 0 when it completes, 3 when it fails")
	f.BoolVar(&o.Follow, "follow", false, "Stream the logs of every pod until the job ends, then exit as --wait")
	f.DurationVar(&o.Timeout, "timeout", 0, "With --wait or --follow, give up after this long (exit 4); 0 waits forever")
	o.PrintFlags.AddFlags(cmd)
}

// Complete reads the command line, the namespace and the clients, and
// sets up the printer.
func (o *runOptions) Complete(cmd *cobra.Command, args []string) error {
	o.changed = cmd.Flags().Changed
	o.explicitNS = cmd.Flags().Changed("namespace")
	o.names = args
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		o.names, o.command = args[:dash], args[dash:]
	}
	if len(o.names) > 0 {
		o.name = o.names[0]
	}
	if err := o.completePrinter(); err != nil {
		return err
	}
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	// --dry-run=client asks nothing of the cluster, unless the job comes
	// from one there.
	if o.DryRun == cmdutil.DryRunClient && !o.rerun {
		return nil
	}
	if o.client, err = o.getter.Client(); err != nil {
		return err
	}
	if o.Follow {
		o.kube, err = o.getter.Kubernetes()
	}
	return err
}

// Validate checks the command line before anything is sent.
func (o *runOptions) Validate() error {
	if len(o.names) > 1 {
		return cmdutil.UsageError("run takes one job name (got %q); put the command after --, e.g. kubectl mpi run pi --image IMG -- mpirun ./pi", o.names)
	}
	switch o.DryRun {
	case cmdutil.DryRunNone, cmdutil.DryRunClient, cmdutil.DryRunServer:
	default:
		return cmdutil.UsageError(`--dry-run=%q: use none, client or server`, o.DryRun)
	}
	if o.DryRun != cmdutil.DryRunNone && (o.Wait || o.Follow) {
		return cmdutil.UsageError("--dry-run=%s submits nothing to wait for: drop --wait and --follow", o.DryRun)
	}
	if o.Timeout != 0 && !o.Wait && !o.Follow {
		return cmdutil.UsageError("--timeout bounds --wait and --follow: add one of them")
	}
	if o.Timeout < 0 {
		return cmdutil.UsageError("--timeout=%s cannot be negative", o.Timeout)
	}
	if out := *o.PrintFlags.OutputFormat; out != "" && out != "yaml" && out != "json" && out != "name" {
		return cmdutil.UsageError(`-o %q: use yaml, json or name`, out)
	}
	if len(o.Filenames) > 0 {
		if o.name != "" || len(o.command) > 0 {
			return cmdutil.UsageError("-f takes the jobs from files: drop the job name and the command")
		}
		for _, f := range jobFlagNames {
			if o.changed(f) {
				return cmdutil.UsageError("--%s shapes a job built from flags; with -f, set it in the file", f)
			}
		}
		return cmdutil.StdinOnce(o.Filenames)
	}
	if o.name == "" {
		return cmdutil.UsageError("run needs a job name: kubectl mpi run NAME --image IMAGE -- COMMAND (or -f FILE)")
	}
	// A runtime named on purpose brings its image; the default runtimes'
	// images are samples, never the user's program.
	if o.Job.Image == "" && o.Job.Runtime == "" && !o.rerun {
		return cmdutil.UsageError("--image is required: the container image of the launcher and the workers (or --runtime, to run the image of that runtime)")
	}
	return nil
}

// completePrinter sets up the printer of -o. Any -o but yaml, json and
// name is Validate's to refuse, in its own words.
func (o *runOptions) completePrinter() error {
	switch *o.PrintFlags.OutputFormat {
	case "", "yaml", "json", "name":
	default:
		return nil
	}
	switch o.DryRun {
	case cmdutil.DryRunClient:
		if err := o.PrintFlags.Complete("%s (dry run)"); err != nil {
			return err
		}
	case cmdutil.DryRunServer:
		if err := o.PrintFlags.Complete("%s (server dry run)"); err != nil {
			return err
		}
	}
	p, err := o.PrintFlags.ToPrinter()
	if err != nil {
		return cmdutil.AsUsage(err)
	}
	o.printer = p
	return nil
}

// Run submits the job (or jobs) and waits as asked.
func (o *runOptions) Run(ctx context.Context) error {
	if len(o.Filenames) > 0 {
		return o.runFiles(ctx)
	}
	spec, err := o.Job.Spec(o.name, o.namespace, o.command, o.changed)
	if err != nil {
		return cmdutil.AsUsage(err)
	}
	if o.DryRun == cmdutil.DryRunClient {
		// Nothing is asked of the cluster: the job as the flags build it.
		return o.submit(ctx, &jobPlan{TrainJob: BuildTrainJob(spec)})
	}
	plan, err := prepare(ctx, o.client, spec)
	if err != nil {
		return err
	}
	return o.submit(ctx, plan)
}

// submit creates a planned job, prints it and waits as asked; rerun shares
// it.
func (o *runOptions) submit(ctx context.Context, plan *jobPlan) error {
	for _, w := range plan.Warnings {
		warn(o.ErrOut, "%s", w)
	}
	for _, n := range plan.Notes {
		fmt.Fprintf(o.ErrOut, "Note: %s\n", n)
	}
	if err := submitPlan(ctx, o.client, plan, o.DryRun); err != nil {
		return err
	}
	if err := o.printer.PrintObj(plan.TrainJob, o.Out); err != nil {
		return err
	}
	return o.await(ctx, []*trainer.TrainJob{plan.TrainJob})
}

func (o *runOptions) await(ctx context.Context, jobs []*trainer.TrainJob) error {
	if !o.Wait && !o.Follow {
		return nil
	}
	w := &wait.Waiter{Client: o.client, ErrOut: o.ErrOut, Clock: o.clock, Timeout: o.Timeout, Quiet: o.Follow}
	return awaitAll(ctx, w, o.kube, o.Out, jobs, o.Follow)
}

// runFiles submits the jobs of files: all are checked first, then created.
func (o *runOptions) runFiles(ctx context.Context) error {
	all, notes, err := readFiles(o.Filenames, o.In, o.namespace, o.explicitNS)
	for _, n := range notes {
		fmt.Fprintln(o.ErrOut, n)
	}
	if err != nil {
		return err
	}
	if o.DryRun != cmdutil.DryRunClient {
		if errs := checkAll(ctx, o.client, all); len(errs) > 0 {
			return fmt.Errorf("the API server rejected the input; nothing was created:\n%w", errors.Join(errs...))
		}
	}
	jobs, err := createAll(ctx, o.client, all, o.DryRun, func(obj runtime.Object) error {
		return o.printer.PrintObj(obj, o.Out)
	})
	if err != nil {
		return err
	}
	return o.await(ctx, jobs)
}

func warn(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "Warning: "+format+"\n", args...)
}
