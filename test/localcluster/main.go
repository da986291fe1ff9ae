// Command cluster runs Torus's local cluster on a plain machine, with no
// container engine: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler on 127.0.0.1, kwok simulating nodes and pods, the JobSet
// and Kueue controllers with their webhooks, and the Torus operator. Every
// binary is built from pinned Go modules (make testbin); every process is
// tracked by a PID file and stopped by PID.
//
//	cluster up [-real-node] [-openshift] ...  # start it; the kubeconfig is .cluster/kubeconfig
//	cluster down          # stop every process and remove the state
//	cluster status        # which components run
//	cluster reclaim       # clean up after real nodes whose cluster was killed
//	cluster node-check    # whether real nodes (-real-node) can run here, and if not why
//	cluster image -suite bookworm -tag REGISTRY/torus-mpi:bookworm -o FILE
//	                      # a reference MPI image as a docker archive, for a registry
//
// Each verb takes its own flags (cluster VERB -h lists them).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// command is a verb of the tool: its flags beyond -dir and -testbin,
// which every verb takes, and what it does.
type command struct {
	name, summary string
	flags         func(*flag.FlagSet, *cluster)
	run           func(context.Context, *cluster) error
}

// imageOptions are the image verb's flags.
type imageOptions struct{ suite, tag, out string }

var commands = []command{
	{name: "up", summary: "start the cluster (kubeconfig: DIR/kubeconfig)", flags: upFlags, run: runUp},
	{name: "down", summary: "stop every process and remove the state; the logs stay", run: func(_ context.Context, c *cluster) error { c.down(); return nil }},
	{name: "status", summary: "each component's state; fails unless every one runs", run: func(_ context.Context, c *cluster) error { return c.status() }},
	// What up does first: clean up after real nodes whose cluster was
	// killed before its down, or say which cluster still runs them.
	{name: "reclaim", summary: "clean up after real nodes whose cluster was killed", run: func(_ context.Context, c *cluster) error { return c.reclaimHost() }},
	{name: "node-check", summary: "whether real nodes can run here, and if not why", run: func(ctx context.Context, c *cluster) error { return c.nodeCheck(ctx) }},
	{name: "image", summary: "a reference MPI image as a docker archive, for a registry", flags: imageFlags, run: func(ctx context.Context, c *cluster) error {
		return c.writeMPIImage(ctx, c.image.suite, c.image.tag, c.image.out)
	}},
}

func upFlags(fs *flag.FlagSet, c *cluster) {
	fs.StringVar(&c.operator, "operator", "bin/torus-operator", "the Torus operator binary (make build); empty starts the cluster without the operator (test/olm installs and runs its own)")
	fs.BoolVar(&c.upstream, "upstream-trainer", false, "run upstream Trainer's controller (trainer-controller-manager from -testbin, with its webhooks) instead of the Torus operator, for side-by-side measures (make bench-e2e-real)")
	fs.IntVar(&c.nodes, "nodes", 4, "kwok nodes to create")
	fs.BoolVar(&c.realNode, "real-node", false, "also run real nodes (kubelet + containerd, root, each in namespaces of its own) on which pods really run")
	fs.IntVar(&c.realNodes, "real-nodes", defaultRealNodes, "with -real-node, how many real nodes")
	fs.BoolVar(&c.openshift, "openshift", false, "OpenShift's pod security: SecurityContextConstraints, namespace UID ranges and OpenShift's SCC admission deciding every pod (hack/testbin/build.sh openshift)")
	fs.BoolVar(&c.kueueMPIJob, "kueue-mpijob", false, "Kueue also admits Kubeflow's MPIJobs (its kubeflow.org/mpijob integration, set up once their CRD is installed), for side-by-side measures with mpi-operator (make bench-mpi-operator)")
	fs.DurationVar(&c.podsReadyTimeout, "pods-ready-timeout", c.podsReadyTimeout, "Kueue's waitForPodsReady.timeout: a job whose pods do not all run within it is evicted and started again (make bench-maxima raises it for jobs whose pods take longer to start on these cores)")
	fs.Var(&c.kueueConcurrency, "kueue-concurrency", "KIND=N[,KIND=N]: Kueue reconciles N objects of KIND (as its controller.groupKindConcurrency names them, such as JobSet.jobset.x-k8s.io) at once, over what its own manifests set (make bench-many MANY=1000x8 gives its JobSets 5)")
	fs.StringVar(&c.kwokAddress, "kwok-address", "", "a private IPv4 address for kwok's nodes (root: up adds it to the loopback interface, down removes it), such as 10.236.0.1, so that the API server's node proxy, which refuses loopback addresses, reaches their kubelet endpoints and kubectl mpi top reads their usage; default 127.0.0.1")
	fs.BoolVar(&c.metricsServer, "metrics-server", false, "also run metrics-server (hack/testbin/build.sh metrics-server) serving the metrics API from kwok's nodes, as most clusters serve kubectl top; needs -kwok-address")
	fs.StringVar(&c.operatorImage, "operator-image", "", "with -real-node, an operator binary to import into the node as the image the bundle's CSV deploys (default: the -operator binary)")
}

func imageFlags(fs *flag.FlagSet, c *cluster) {
	fs.StringVar(&c.image.suite, "suite", "bookworm", "the Debian suite of the MPI image (bookworm: Open MPI 4, Python, mpi4py and the reference training; trixie: MPICH and Open MPI 5), with -nossh for the variant without OpenSSH")
	fs.StringVar(&c.image.tag, "tag", "", "the image's name and tag in the archive, as a registry will serve it")
	fs.StringVar(&c.image.out, "o", "", "the archive to write")
}

// parse reads a verb's command line into a cluster: the common flags, the
// verb's own, then paths made absolute and ranges checked.
func parse(cmd command, args []string, output io.Writer) (*cluster, error) {
	c := &cluster{realNodes: defaultRealNodes, podsReadyTimeout: 5 * time.Minute}
	fs := flag.NewFlagSet("cluster "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.dir, "dir", ".cluster", "state directory: kubeconfig, certificates, logs, PID files")
	fs.StringVar(&c.testbin, "testbin", ".testbin/bin", "directory of the control-plane binaries (make testbin)")
	if cmd.flags != nil {
		cmd.flags(fs, c)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage // the flag package said why, with the usage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("cluster %s takes no arguments, got %q", cmd.name, fs.Args())
	}
	var err error
	if c.dir, err = filepath.Abs(c.dir); err != nil {
		return nil, err
	}
	if c.testbin, err = filepath.Abs(c.testbin); err != nil {
		return nil, err
	}
	if c.operator != "" {
		if c.operator, err = filepath.Abs(c.operator); err != nil {
			return nil, err
		}
	}
	if c.operatorImage == "" {
		c.operatorImage, c.operatorImageDefault = c.operator, true
	}
	if c.operatorImage != "" {
		if c.operatorImage, err = filepath.Abs(c.operatorImage); err != nil {
			return nil, err
		}
	}
	if c.realNodes < 1 || c.realNodes > maxRealNodes {
		return nil, fmt.Errorf("-real-nodes %d: give 1 to %d", c.realNodes, maxRealNodes)
	}
	if err := checkKwokAddress(c.kwokAddress, os.Geteuid() == 0); err != nil {
		return nil, err
	}
	if c.metricsServer && c.kwokAddress == "" {
		return nil, errors.New("-metrics-server needs -kwok-address: the API server reaches an aggregated API only at an address that is not loopback")
	}
	if c.podsReadyTimeout < time.Second {
		return nil, fmt.Errorf("-pods-ready-timeout %s: give a duration of a second or more, such as 30m", c.podsReadyTimeout)
	}
	return c, nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cluster VERB [flags]   (cluster VERB -h: its flags)")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", cmd.name, cmd.summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	i := slices.IndexFunc(commands, func(cmd command) bool { return cmd.name == os.Args[1] })
	if i < 0 {
		usage(os.Stderr)
		os.Exit(2)
	}
	c, err := parse(commands[i], os.Args[2:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commands[i].run(ctx, c); err != nil {
		if !errors.Is(err, errUpFailed) {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
		os.Exit(1)
	}
}

// errUsage: the command line was wrong, and the flag package said how.
var errUsage = errors.New("usage")

// errUpFailed: up said why, and cleaned up after itself.
var errUpFailed = errors.New("up failed")

// runUp starts the cluster; on a failure it stops what it started and
// cleans up after the real nodes, keeping the logs.
func runUp(ctx context.Context, c *cluster) error {
	start := time.Now()
	if err := c.up(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "cluster up failed:", err)
		fmt.Fprintln(os.Stderr, "stopping what was started; logs stay in", filepath.Join(c.dir, "logs"))
		c.stopAll()
		if err := c.cleanRealNode(); err != nil {
			fmt.Fprintln(os.Stderr, "cleaning up after the real node:", err)
		}
		return errUpFailed
	}
	c.logf("up in %.1fs; export KUBECONFIG=%s", time.Since(start).Seconds(), filepath.Join(c.dir, "kubeconfig"))
	return nil
}

func (c *cluster) logf(format string, args ...any) {
	fmt.Printf("cluster: "+format+"\n", args...)
}
