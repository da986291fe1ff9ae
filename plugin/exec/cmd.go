package exec

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/util/term"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/mpi"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
)

const execRankLong = `Run a command in the pod of an MPI rank. The rank is mapped to its host as the job's hostfile lays
ranks out (slots per worker, the launcher first when it runs ranks), which is how Open MPI, Intel MPI and
MPICH place them unless mpirun is told otherwise.

With --all the command runs on every worker at once; each line of output is prefixed with its worker and
the command exits 1 if it failed anywhere. Otherwise exec-rank exits with the command's own exit code.`

const execRankExample = `  # A shell on the pod of rank 13
  kubectl mpi exec-rank pi 13 -it -- bash

  # Which GPUs does every worker see?
  kubectl mpi exec-rank pi --all -- nvidia-smi -L`

// execRankOptions are the flags and clients of kubectl mpi exec-rank.
type execRankOptions struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	Stdin     bool
	TTY       bool
	All       bool
	Quiet     bool
	Container string

	positional []string
	name       string
	rank       int32
	command    []string
	namespace  string
	client     client.Client
	kube       kubernetes.Interface
	config     *rest.Config
}

// newExecRankOptions returns exec-rank's defaults.
func newExecRankOptions(getter plugclient.Getter, streams genericiooptions.IOStreams) *execRankOptions {
	return &execRankOptions{getter: getter, IOStreams: streams, Container: mpi.TrainerContainer}
}

// NewCmd returns kubectl mpi exec-rank.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newExecRankOptions(getter, streams)
	cmd := &cobra.Command{
		Use:               "exec-rank NAME RANK [-it] -- COMMAND [ARGS...] | exec-rank NAME --all -- COMMAND [ARGS...]",
		Short:             "Run a command in the pod of an MPI rank, or on every worker",
		Long:              execRankLong,
		Example:           execRankExample,
		ValidArgsFunction: cmdutil.CompleteJobNames(getter, 1),
		RunE:              cmdutil.RunE(o),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.Stdin, "stdin", "i", false, "Pass standard input to the command")
	f.BoolVarP(&o.TTY, "tty", "t", false, "Allocate a terminal (with -i for an interactive shell)")
	f.BoolVar(&o.All, "all", false, "Run on every worker in parallel, output prefixed [worker-N]")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "Do not say which pod the rank maps to")
	f.StringVarP(&o.Container, "container", "c", o.Container, "Container to run in")
	return cmd
}

// Complete splits the arguments into NAME, RANK and the command, and reads
// the namespace and the clients.
func (o *execRankOptions) Complete(cmd *cobra.Command, args []string) error {
	o.positional = args
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		o.positional, o.command = args[:dash], args[dash:]
	}
	var err error
	if o.namespace, err = o.getter.Namespace(); err != nil {
		return err
	}
	if o.client, o.kube, err = plugclient.Clients(o.getter); err != nil {
		return err
	}
	o.config, err = o.getter.RESTConfig()
	return err
}

// Validate checks the arguments and reads RANK.
func (o *execRankOptions) Validate() error {
	pos := o.positional
	if len(o.command) == 0 {
		return cmdutil.UsageError("give the command after --, e.g. kubectl mpi exec-rank pi 3 -- hostname")
	}
	want := 2
	if o.All {
		want = 1
	}
	if len(pos) != want {
		if o.All {
			return cmdutil.UsageError("exec-rank --all takes the job name only (got %q)", pos)
		}
		return cmdutil.UsageError("exec-rank takes a job name and a rank (got %q): kubectl mpi exec-rank NAME RANK -- COMMAND", pos)
	}
	o.name = pos[0]
	if !o.All {
		r, err := strconv.ParseInt(pos[1], 10, 32)
		if err != nil || r < 0 {
			return cmdutil.UsageError("rank %q: give a rank number from 0", pos[1])
		}
		o.rank = int32(r)
	}
	if o.All && (o.Stdin || o.TTY) {
		return cmdutil.UsageError("--all runs on many pods at once: -i and -t need one")
	}
	return nil
}

// Run execs.
func (o *execRankOptions) Run(ctx context.Context) error {
	c, kube, cfg := o.client, o.kube, o.config
	tj, err := job.Get(ctx, c, o.namespace, o.name)
	if err != nil {
		return err
	}
	info := job.Resolve(ctx, job.NewRuntimes(c), tj)
	pods, err := job.Pods(ctx, c, tj)
	if err != nil {
		return err
	}
	if o.All {
		targets, err := workers(info, pods)
		if err != nil {
			return err
		}
		results := execAll(ctx, cfg, kube, targets, o.Container, o.command, o.Out, o.ErrOut)
		failed := 0
		var errs []error
		for _, r := range results {
			switch {
			case r.Err != nil:
				failed++
				errs = append(errs, fmt.Errorf("%s: %w", r.Target.Host.Name(), r.Err))
			case r.Code != 0:
				failed++
				errs = append(errs, fmt.Errorf("%s (pod %s): exit code %d", r.Target.Host.Name(), r.Target.Pod.Name, r.Code))
			}
		}
		if failed > 0 {
			return fmt.Errorf("the command failed on %d of %d workers:\n%w", failed, len(results), errors.Join(errs...))
		}
		return nil
	}

	target, err := forRank(info, pods, o.rank)
	if err != nil {
		return err
	}
	if !o.Quiet {
		fmt.Fprintf(o.ErrOut, "rank %d runs on %s (%s), pod %s\n", o.rank, target.Host.Name(), target.Ranks, target.Pod.Name)
	}
	req := request{Pod: target.Pod, Container: o.Container, Command: o.command, Stdout: o.Out, Stderr: o.ErrOut}
	if o.Stdin {
		req.Stdin = o.In
	}
	// kubectl's terminal handling: raw while an interactive session runs,
	// restored however it ends (a signal included), its size followed.
	tty := term.TTY{In: o.In, Out: o.Out, Raw: o.Stdin}
	if o.TTY {
		if !tty.IsTerminalIn() {
			if !o.Quiet {
				fmt.Fprintln(o.ErrOut, "Unable to use a TTY: input is not a terminal")
			}
		} else {
			req.TTY = true
			req.Sizes = remoteSizes(tty.MonitorSize(tty.GetSize()))
		}
	}
	var code int
	run := func() (err error) {
		code, err = execute(ctx, cfg, kube, req)
		return err
	}
	if req.TTY {
		err = tty.Safe(run)
	} else {
		err = run()
	}
	if err != nil {
		return err
	}
	if code != 0 {
		// The command's own exit code, as kubectl exec does.
		return cmdutil.WithCode(code, nil)
	}
	return nil
}
