package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/mpi"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
)

const doctorLong = `Check that the cluster can run MPI jobs with Torus, and that you can: the Trainer, Torus, JobSet and
Kueue APIs, OpenShift AI's own Trainer controller (its DataScienceCluster's trainer component), the
operator (its leader lease) and its webhooks (a dry-run TrainJob), Torus's runtimes,
your permissions in the namespace, the LocalQueues you may use, the MPINetworkProfiles and their
NetworkAttachmentDefinitions, the GPUs nodes offer, and with --checkpoint-volume a claim a job would keep
its checkpoints on. Each check passes, warns or fails and says how
to fix it. Exit code 1 when a check fails.`

// doctorOptions are the flags and clients of kubectl mpi doctor.
type doctorOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams
	Output     string
	Network    string
	MPI        string
	Checkpoint string

	namespace string
	impl      mpi.Implementation
	client    client.Client
	kube      kubernetes.Interface
}

// newDoctorOptions returns doctor's defaults.
func newDoctorOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *doctorOptions {
	return &doctorOptions{getter: getter, IOStreams: streams, MPI: "openmpi"}
}

// NewCmd returns kubectl mpi doctor.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newDoctorOptions(getter, streams)
	cmd := &cobra.Command{
		Use:     "doctor [-o json]",
		Short:   "Check the cluster and your access for MPI jobs, with a fix for each problem",
		Long:    doctorLong,
		Example: "  kubectl mpi doctor\n  kubectl mpi doctor -n team-a -o json\n  kubectl mpi doctor -n team-a --network ib-sriov\n  kubectl mpi doctor -n team-a --checkpoint-volume ckpt",
		Args:    cmdutil.ExactArgs(0, "no arguments"),
		RunE:    cmdutil.RunE(o),
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "json for scripts")
	cmd.Flags().StringVar(&o.Network, "network", "", "Also run the operator's preflight for this MPINetworkProfile in the namespace")
	cmd.Flags().StringVar(&o.MPI, "mpi", o.MPI, "MPI implementation the --network check assumes (its profile environment)")
	cmd.Flags().StringVar(&o.Checkpoint, "checkpoint-volume", "", "Also check that this CLAIM[:PATH] would be admitted as a job's checkpoint volume in the namespace")
	return cmd
}

// Complete reads the namespace and the clients.
func (o *doctorOptions) Complete(_ *cobra.Command, _ []string) error {
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	o.client, o.kube, err = plugclient.Clients(o.getter)
	return err
}

// Validate checks -o and reads --mpi.
func (o *doctorOptions) Validate() error {
	if o.Output != "" && o.Output != "json" {
		return cmdutil.UsageError("-o %q: use json, or nothing for the report", o.Output)
	}
	impl, err := mpi.ParseImplementation(o.MPI)
	if err != nil {
		return cmdutil.UsageError("--mpi: %v", err)
	}
	o.impl = impl
	return nil
}

// Run checks and reports.
func (o *doctorOptions) Run(ctx context.Context) error {
	d := &doctor{Client: o.client, Discovery: o.kube.Discovery(), Namespace: o.namespace, Network: o.Network, Implementation: o.impl, Checkpoint: o.Checkpoint}
	results := d.Run(ctx)
	if o.Output == "json" {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else if err := writeDoctor(o.Out, results); err != nil {
		return err
	}
	if failed(results) {
		return cmdutil.WithCode(cmdutil.ExitFailure, nil)
	}
	return nil
}

func writeDoctor(w io.Writer, results []result) error {
	width := 0
	for _, r := range results {
		width = max(width, len(r.Check))
	}
	counts := map[status]int{}
	for _, r := range results {
		counts[r.Status]++
		if _, err := fmt.Fprintf(w, "%s  %-*s  %s\n", r.Status, width, r.Check, r.Message); err != nil {
			return err
		}
		if r.Fix != "" {
			fmt.Fprintf(w, "      %s  fix: %s\n", strings.Repeat(" ", width), r.Fix)
		}
	}
	_, err := fmt.Fprintf(w, "\n%d passed, %d warnings, %d failed\n", counts[pass], counts[warn], counts[fail])
	return err
}
