// Package app is kubectl-mpi's root command: the kubeconfig flags every
// command shares, bad flags as usage errors, and each verb's command from
// its own package (plugin/run, plugin/list, ...). completion and version
// stay here: they describe the tree itself.
package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/torus-mpi/torus/pkg/version"
	"github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/dashboard"
	"github.com/torus-mpi/torus/plugin/delete"
	"github.com/torus-mpi/torus/plugin/describe"
	"github.com/torus-mpi/torus/plugin/doctor"
	"github.com/torus-mpi/torus/plugin/exec"
	"github.com/torus-mpi/torus/plugin/list"
	"github.com/torus-mpi/torus/plugin/logs"
	"github.com/torus-mpi/torus/plugin/migrate"
	"github.com/torus-mpi/torus/plugin/run"
	"github.com/torus-mpi/torus/plugin/top"
	"github.com/torus-mpi/torus/plugin/wait"
)

const rootLong = `kubectl mpi runs MPI jobs (Open MPI 4 and 5, Intel MPI, MPICH) as Kubeflow Trainer TrainJobs that the
Torus operator reconciles into JobSets, gang-scheduled through Kueue, and helps debug them: state, ranks,
logs of every pod, a shell on the pod of any rank. Installed on the PATH as kubectl-mpi it is both
"kubectl mpi" and "oc mpi".

Exit codes: 0 success; 1 error (API errors, unknown job, permission denied, invalid manifests); 2 usage
error (bad flags or arguments; nothing sent); 3 the job failed (run --wait/--follow, wait); 4 timeout.`

// NewDefaultCmd is the command main runs: standard streams and kubeconfig
// flags.
func NewDefaultCmd() *cobra.Command {
	return NewCmd(genericclioptions.NewConfigFlags(true), genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
}

// NewCmd builds the command tree on the given client configuration and
// streams, so tests can run it against their own API server.
func NewCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		// Use is the plugin's name; usage shows it as kubectl shows
		// plugins ("kubectl mpi run ...").
		Use:           "mpi",
		Short:         "Run and debug MPI jobs on Kubernetes",
		Long:          rootLong,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl mpi"},
		SilenceUsage:  true,
		SilenceErrors: true,
		// completion is ours: it completes the kubectl-mpi binary.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	configFlags.AddFlags(cmd.PersistentFlags())
	// A bad flag is a usage error (exit 2), like a bad argument.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return cmdutil.UsageError("%v (see %s --help)", err, c.CommandPath())
	})
	getter := client.New(configFlags)
	cmd.AddCommand(newVersionCmd())
	cmd.AddCommand(run.NewCmd(getter, streams))
	cmd.AddCommand(list.NewCmd(getter, streams))
	cmd.AddCommand(describe.NewCmd(getter, streams))
	cmd.AddCommand(logs.NewCmd(getter, streams))
	cmd.AddCommand(wait.NewCmd(getter, streams))
	cmd.AddCommand(delete.NewCmd(getter, streams))
	cmd.AddCommand(exec.NewCmd(getter, streams))
	cmd.AddCommand(top.NewCmd(getter, streams))
	cmd.AddCommand(run.NewRerunCmd(getter, streams))
	cmd.AddCommand(doctor.NewCmd(getter, streams))
	cmd.AddCommand(newCompletionCmd())
	cmd.AddCommand(migrate.NewCmd(getter, streams))
	cmd.AddCommand(dashboard.NewCmd(getter, streams))
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
