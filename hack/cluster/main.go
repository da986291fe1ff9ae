// Command cluster runs Torus's local cluster on a plain machine, with no
// container engine: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler on 127.0.0.1, kwok simulating nodes and pods, the JobSet
// and Kueue controllers with their webhooks, and the Torus operator. Every
// binary is built from pinned Go modules (make testbin); every process is
// tracked by a PID file and stopped by PID.
//
//	cluster up     # start it; the kubeconfig is .cluster/kubeconfig
//	cluster down   # stop every process and remove the state
//	cluster status # which components run
//	cluster node-check # whether a real node (-real-node) can run here, and if not why
//	cluster image -suite bookworm -tag REGISTRY/torus-mpi:bookworm -o FILE
//	                   # a reference MPI image as a docker archive, for a registry
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	c := &cluster{}
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	fs.StringVar(&c.dir, "dir", ".cluster", "state directory: kubeconfig, certificates, logs, PID files")
	fs.StringVar(&c.testbin, "testbin", ".testbin/bin", "directory of the control-plane binaries (make testbin)")
	fs.StringVar(&c.operator, "operator", "bin/torus-operator", "the Torus operator binary (make build); empty starts the cluster without the operator (test/olm installs and runs its own)")
	fs.BoolVar(&c.upstream, "upstream-trainer", false, "run upstream Trainer's controller (trainer-controller-manager from -testbin, with its webhooks) instead of the Torus operator, for side-by-side measures (make bench-e2e-real)")
	fs.IntVar(&c.nodes, "nodes", 4, "kwok nodes to create")
	fs.BoolVar(&c.realNode, "real-node", false, "also run real nodes (kubelet + containerd, root, each in namespaces of its own) on which pods really run")
	fs.IntVar(&c.realNodes, "real-nodes", defaultRealNodes, "with -real-node, how many real nodes")
	fs.BoolVar(&c.openshift, "openshift", false, "OpenShift's pod security: SecurityContextConstraints, namespace UID ranges and OpenShift's SCC admission deciding every pod (hack/testbin/build.sh openshift)")
	var suite, tag, out string
	fs.StringVar(&suite, "suite", "bookworm", "image: the Debian suite of the MPI image (bookworm: Open MPI 4, Python, mpi4py and the reference training; trixie: MPICH and Open MPI 5), with -nossh for the variant without OpenSSH")
	fs.StringVar(&tag, "tag", "", "image: the image's name and tag in the archive, as a registry will serve it")
	fs.StringVar(&out, "o", "", "image: the archive to write")
	fs.StringVar(&c.operatorImage, "operator-image", "", "with -real-node, an operator binary to import into the node as the image the bundle's CSV deploys (default: the -operator binary)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cluster [flags] up|down|status|reclaim|node-check|image")
		fs.PrintDefaults()
	}
	if len(os.Args) < 2 {
		fs.Usage()
		os.Exit(2)
	}
	verb := os.Args[1]
	_ = fs.Parse(os.Args[2:])
	var err error
	if c.dir, err = filepath.Abs(c.dir); err == nil {
		if c.testbin, err = filepath.Abs(c.testbin); err == nil && c.operator != "" {
			c.operator, err = filepath.Abs(c.operator)
		}
		if err == nil && c.operatorImage == "" {
			c.operatorImage, c.operatorImageDefault = c.operator, true
		}
		if err == nil && c.operatorImage != "" {
			c.operatorImage, err = filepath.Abs(c.operatorImage)
		}
	}
	if err == nil && (c.realNodes < 1 || c.realNodes > maxRealNodes) {
		err = fmt.Errorf("-real-nodes %d: give 1 to %d", c.realNodes, maxRealNodes)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch verb {
	case "up":
		start := time.Now()
		if err = c.up(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "cluster up failed:", err)
			fmt.Fprintln(os.Stderr, "stopping what was started; logs stay in", filepath.Join(c.dir, "logs"))
			c.stopAll()
			if err := c.cleanRealNode(); err != nil {
				fmt.Fprintln(os.Stderr, "cleaning up after the real node:", err)
			}
			os.Exit(1)
		}
		c.logf("up in %.1fs; export KUBECONFIG=%s", time.Since(start).Seconds(), filepath.Join(c.dir, "kubeconfig"))
	case "down":
		c.down()
	case "status":
		err = c.status()
	case "reclaim":
		// What up does first: clean up after real nodes whose cluster was
		// killed before its down, or say which cluster still runs them.
		err = c.reclaimHost()
	case "node-check":
		err = c.nodeCheck(ctx)
	case "image":
		err = c.writeMPIImage(ctx, suite, tag, out)
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func (c *cluster) logf(format string, args ...any) {
	fmt.Printf("cluster: "+format+"\n", args...)
}
