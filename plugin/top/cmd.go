package top

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainjob"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
)

const topLong = `Show the CPU and memory each launcher and worker pod of a job uses, beside what it requested, and the
GPUs it requested. Usage comes from metrics.k8s.io when the cluster serves it (metrics-server); otherwise
from each node's kubelet resource metrics through the API server's node proxy (which needs get on
nodes/proxy); CPU is then the rate of the pods' CPU counters between the kubelet's samples of them, by
its timestamps: a first read samples each node a second apart until every pod's CPU has a rate, for at
most 15 s, and shows <pending> for a pod without one.

A pod given GPUs shows each GPU's utilisation and memory, read by running nvidia-smi in its rank container
(which needs create on pods/exec; the NVIDIA container toolkit puts nvidia-smi there). A pod whose GPUs
cannot be read that way shows "-", not an idle GPU.`

const topExample = `  # Usage of every pod of the job
  kubectl mpi top pi

  # Refresh every 5 seconds until the job ends
  kubectl mpi top pi --watch --interval 5s`

// topOptions are the flags and clients of kubectl mpi top.
type topOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	Watch    bool
	Interval time.Duration

	name      string
	namespace string
	client    client.Client
	kube      kubernetes.Interface
	metrics   metricsclient.Interface
	// config execs nvidia-smi in the ranks' containers.
	config *rest.Config
}

// newTopOptions returns top's defaults.
func newTopOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *topOptions {
	return &topOptions{getter: getter, IOStreams: streams, Interval: 2 * time.Second}
}

// NewCmd returns kubectl mpi top.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newTopOptions(getter, streams)
	cmd := &cobra.Command{
		Use:               "top NAME [--watch]",
		Short:             "Show CPU and memory per launcher and worker pod, with their GPUs' use",
		Long:              topLong,
		Example:           topExample,
		Args:              cmdutil.ExactArgs(1, "one job name"),
		ValidArgsFunction: cmdutil.CompleteJobNames(getter, 1),
		RunE:              cmdutil.RunE(o),
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "Refresh until the job ends (Ctrl-C to stop)")
	cmd.Flags().DurationVar(&o.Interval, "interval", o.Interval, "Time between refreshes with --watch")
	return cmd
}

// Complete reads NAME, the namespace and the clients, metrics included.
func (o *topOptions) Complete(_ *cobra.Command, args []string) error {
	o.name = args[0]
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	if o.client, o.kube, err = plugclient.Clients(o.getter); err != nil {
		return err
	}
	cfg, err := o.getter.RESTConfig()
	if err != nil {
		return err
	}
	o.config = cfg
	if o.metrics, err = NewMetricsClient(cfg); err != nil {
		return err
	}
	return nil
}

// Validate checks --interval.
func (o *topOptions) Validate() error {
	if o.Interval < 500*time.Millisecond {
		return cmdutil.UsageError("--interval=%s: use at least 500ms", o.Interval)
	}
	return nil
}

// Run prints usage once, or until the job ends.
func (o *topOptions) Run(ctx context.Context) error {
	c := o.client
	tj, err := job.Get(ctx, c, o.namespace, o.name)
	if err != nil {
		return err
	}
	placement := job.Resolve(ctx, job.NewRuntimes(c), tj).Placement()
	tables := job.NewPodTables(o.kube)
	reader := &usageReader{Kube: o.kube, Metrics: o.metrics, Interval: time.Second, RateWait: rateWait}
	gpus := &gpuReader{Config: o.config, Kube: o.kube}
	progress := cmdutil.NewProgress(o.ErrOut)
	for round := 0; ; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.Interval):
			}
			if tj, err = job.Get(ctx, c, o.namespace, o.name); err != nil {
				return err
			}
		}
		pods, usage, err := reader.Read(ctx, tj.Namespace, api.LabelJobName+"="+tj.Name, func(ctx context.Context) ([]corev1.Pod, error) {
			return jobPods(ctx, c, tables, tj, placement)
		})
		if err != nil {
			return err
		}
		table := podTable(pods, placement, usage, gpus.Read(ctx, pods))
		if o.Watch && progress.IsTerminal() {
			// Redraw in place on a terminal; elsewhere tables follow each other.
			fmt.Fprint(o.Out, "\033[H\033[2J")
		} else if round > 0 {
			fmt.Fprintln(o.Out)
		}
		st := trainjob.StateOf(tj)
		if len(table.Rows) == 0 {
			fmt.Fprintf(o.Out, "MPI job %s has no running pods (%s).\n", tj.Name, st.Phase)
		} else if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, o.Out); err != nil {
			return err
		}
		fmt.Fprintf(o.ErrOut, "%s is %s; usage from %s\n", tj.Name, st.Phase, reader.Source())
		if !o.Watch || trainjob.Finished(tj) {
			return nil
		}
	}
}
