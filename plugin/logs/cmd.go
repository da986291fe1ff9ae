package logs

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/wait"
)

const logsExample = `  # Every pod of the job, each line prefixed [launcher] or [worker-N]
  kubectl mpi logs pi

  # Follow until the job ends, including pods that appear later (a restarted job)
  kubectl mpi logs pi -f

  # The pod that runs rank 13, the last 100 lines with timestamps
  kubectl mpi logs pi --rank 13 --tail 100 --timestamps

  # Why did worker 1 restart?
  kubectl mpi logs pi --worker 1 --previous`

// logsOptions are the flags and clients of kubectl mpi logs.
type logsOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	Rank       int32
	Worker     int32
	Launcher   bool
	Follow     bool
	Since      time.Duration
	Tail       int64
	Timestamps bool
	Previous   bool
	Container  string

	name      string
	namespace string
	changed   func(string) bool
	client    client.WithWatch
	kube      kubernetes.Interface
}

// newLogsOptions returns logs' defaults.
func newLogsOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *logsOptions {
	return &logsOptions{getter: getter, IOStreams: streams, Tail: -1, Container: mpi.TrainerContainer}
}

// NewCmd returns kubectl mpi logs.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newLogsOptions(getter, streams)
	cmd := &cobra.Command{
		Use:               "logs NAME [--rank N | --worker I | --launcher] [-f] [--since D] [--tail N] [--timestamps]",
		Short:             "Stream the logs of every pod of a job at once, each line prefixed with its host",
		Example:           logsExample,
		Args:              cmdutil.ExactArgs(1, "one job name"),
		ValidArgsFunction: cmdutil.CompleteJobNames(getter, 1),
		RunE:              cmdutil.RunE(o),
	}
	f := cmd.Flags()
	f.Int32Var(&o.Rank, "rank", 0, "Only the pod that runs this MPI rank")
	f.Int32Var(&o.Worker, "worker", 0, "Only worker I (the pod <job>-node-0-I)")
	f.BoolVar(&o.Launcher, "launcher", false, "Only the launcher")
	f.BoolVarP(&o.Follow, "follow", "f", false, "Follow the logs until the job ends, including pods that start later")
	f.DurationVar(&o.Since, "since", 0, "Only lines newer than this, e.g. 10m")
	f.Int64Var(&o.Tail, "tail", o.Tail, "Only the last N lines of each pod (-1: all)")
	f.BoolVar(&o.Timestamps, "timestamps", false, "Prefix each line with its time")
	f.BoolVarP(&o.Previous, "previous", "p", false, "The logs of the previous run of each container (after a restart)")
	f.StringVarP(&o.Container, "container", "c", o.Container, "Container to read: node (the MPI one) or mpi-ssh-setup")
	return cmd
}

// Complete reads NAME, which flags were given, the namespace and the
// clients.
func (o *logsOptions) Complete(cmd *cobra.Command, args []string) error {
	o.name = args[0]
	o.changed = cmd.Flags().Changed
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	o.client, o.kube, err = plugclient.Clients(o.getter)
	return err
}

// Validate checks the flags.
func (o *logsOptions) Validate() error {
	n := 0
	for _, f := range []string{"rank", "worker", "launcher"} {
		if o.changed(f) {
			n++
		}
	}
	if n > 1 {
		return cmdutil.UsageError("--rank, --worker and --launcher each pick pods: give one of them")
	}
	if o.changed("rank") && o.Rank < 0 {
		return cmdutil.UsageError("--rank=%d: ranks start at 0", o.Rank)
	}
	if o.changed("worker") && o.Worker < 0 {
		return cmdutil.UsageError("--worker=%d: workers are numbered from 0", o.Worker)
	}
	if o.Since < 0 {
		return cmdutil.UsageError("--since=%s cannot be negative", o.Since)
	}
	if o.Tail < -1 {
		return cmdutil.UsageError("--tail=%d: give a number of lines, or -1 for all", o.Tail)
	}
	if o.Previous && o.Follow {
		return cmdutil.UsageError("--previous reads a container that has stopped: drop -f")
	}
	return nil
}

// Run streams the logs.
func (o *logsOptions) Run(ctx context.Context) error {
	c := o.client
	opts := Options{
		Namespace:  o.namespace,
		Prefix:     job.HostPrefix,
		Order:      job.SortPods,
		Container:  o.Container,
		Follow:     o.Follow,
		Timestamps: o.Timestamps,
		Previous:   o.Previous,
		Out:        o.Out,
		ErrOut:     o.ErrOut,
	}
	// Without --rank the flags alone say which pods: they are listed
	// while the TrainJob is read, which puts the first line a round trip
	// sooner. A rank's host is the job's placement's to say.
	type listing struct {
		pods *corev1.PodList
		err  error
	}
	var listed chan listing
	if !o.changed("rank") {
		listed = make(chan listing, 1)
		selector, err := job.HostsSelector(o.name, o.flagHosts())
		if err != nil {
			return err
		}
		// Not canceled when the job cannot be read: client-go logs a list
		// canceled while its answer is read as an error line of its own, on
		// the standard error a script reads. The list ends on its own, or
		// with ctx, into the buffered channel.
		go func() {
			pods, err := listPods(ctx, o.kube, Options{Namespace: o.namespace, LabelSelector: selector})
			listed <- listing{pods, err}
		}()
	}
	tj, err := job.Get(ctx, c, o.namespace, o.name)
	if err != nil {
		return err
	}
	hosts, err := o.hosts(ctx, c, tj)
	if err != nil {
		return err
	}
	if listed != nil {
		l := <-listed
		if l.err != nil {
			return l.err
		}
		opts.Listed = l.pods
	}
	if o.Since > 0 {
		opts.SinceSeconds = ptr.To(int64(o.Since.Seconds()))
	}
	if o.Tail >= 0 {
		opts.TailLines = ptr.To(o.Tail)
	}
	return StreamJob(ctx, c, o.kube, tj, hosts, opts)
}

// StreamJob streams the logs of a job's own pods (those of its Jobs, of
// the ones that wear its labels) of hosts (nil: every host), launcher
// first, each line prefixed with its host; following ends with the job.
// opts says the rest (container, tail, where to write); its selection and
// order are the job's.
func StreamJob(ctx context.Context, c client.WithWatch, kube kubernetes.Interface, tj *trainer.TrainJob, hosts []mpi.Host, opts Options) error {
	selector, err := job.HostsSelector(tj.Name, hosts)
	if err != nil {
		return err
	}
	opts.Namespace, opts.LabelSelector = tj.Namespace, selector
	opts.Prefix, opts.Order = job.HostPrefix, job.SortPods
	owner := job.NewOwner(c, tj)
	include := job.OfHosts(hosts)
	opts.Include = func(p *corev1.Pod) bool { return include(p) && owner.Owns(ctx, p) }
	if opts.Follow {
		ended := make(chan struct{})
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			// Following ends with the job; a job whose state cannot be
			// followed is followed until interrupted, and the reader told.
			if _, err := wait.For(wctx, c, tj.Namespace, tj.Name, trainjob.Finished, nil); err != nil {
				if wctx.Err() == nil && opts.ErrOut != nil {
					fmt.Fprintf(opts.ErrOut, "(cannot follow the job's state, so following its logs until interrupted: %v)\n", err)
				}
				return
			}
			close(ended)
		}()
		opts.Ended = ended
	}
	return Stream(ctx, kube, opts)
}

// flagHosts are the hosts --launcher or --worker pick, nil for every
// host; --rank's are the job's to say (hosts).
func (o *logsOptions) flagHosts() []mpi.Host {
	switch {
	case o.changed("launcher"):
		return []mpi.Host{{Role: api.RoleLauncher}}
	case o.changed("worker"):
		return []mpi.Host{{Role: api.RoleWorker, Index: o.Worker}}
	}
	return nil
}

// hosts are the hosts of --rank, --worker or --launcher, nil for every
// host.
func (o *logsOptions) hosts(ctx context.Context, c client.Reader, tj *trainer.TrainJob) ([]mpi.Host, error) {
	switch {
	case o.changed("worker"):
		info := job.Resolve(ctx, job.NewRuntimes(c), tj)
		if w := info.Workers(); w > 0 && o.Worker >= w {
			return nil, fmt.Errorf("--worker=%d: MPI job %s has workers 0 to %d", o.Worker, tj.Name, w-1)
		}
	case o.changed("rank"):
		info := job.Resolve(ctx, job.NewRuntimes(c), tj)
		host, err := info.Placement().HostOfRank(o.Rank)
		if err != nil {
			return nil, fmt.Errorf("--rank: MPI job %s: %w", tj.Name, err)
		}
		return []mpi.Host{{Role: host.Role, Index: host.Index}}, nil
	}
	return o.flagHosts(), nil
}
