// Package app builds the kubectl-mpi command tree. It holds no cobra-free
// logic: commands parse flags and call libraries.
package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/torus-mpi/torus/operator/version"
)

// NewDefaultCmd is the command main runs: standard streams and kubeconfig
// flags.
func NewDefaultCmd() *cobra.Command {
	return NewCmd(genericclioptions.NewConfigFlags(true), genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
}

// NewCmd builds the command tree on the given client configuration and
// streams, so tests can run it against their own API server.
func NewCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "kubectl mpi",
		Short:         "Run and debug MPI jobs on Kubernetes",
		Long:          "kubectl mpi runs MPI jobs (Open MPI, Intel MPI, MPICH) as Kubeflow Trainer TrainJobs reconciled by the Torus operator.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	configFlags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(newVersionCmd())
	cmd.AddCommand(newMigrateCmd(configFlags, streams))
	return cmd
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubectl-mpi %s\n", version.Version)
			return err
		},
	}
}
