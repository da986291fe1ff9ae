package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
)

// realNodeLabel marks the local cluster's real nodes (test/localcluster
// -real-node), where the local runtimes place their pods.
const realNodeLabel = "torus-mpi.io/real-node"

// hostsLaunches are the hosts section's jobs: Open MPI 4.1 on the bookworm
// image, one rank per worker, through the image's OpenSSH and through the
// launch agent at the operator's defaults on the same image without
// OpenSSH.
var hostsLaunches = []struct {
	label string
	job   scaleJob
}{
	{"OpenSSH", scaleJob{runtime: localRuntime, launch: api.RemoteLaunchOpenSSH}},
	{"launch agent", scaleJob{runtime: localRuntime, image: "registry.torus.local/mpi-nossh:1", launch: api.RemoteLaunchAgent}},
}

// hostsOptions are the hosts section's: the jobs' sizes in workers, and
// how many jobs of each size and remote launch run.
type hostsOptions struct {
	sizes []int
	runs  int
}

// hostsMax in a list of sizes stands for as many workers as the real nodes
// hold.
const hostsMax = -1

// parseHosts reads the hosts section's sizes: worker counts and "max",
// comma-separated, in ascending order with max last.
func parseHosts(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "max" {
			sizes = append(sizes, hostsMax)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-hosts: %q is neither a count of workers nor max", f)
		}
		sizes = append(sizes, n)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i-1] == hostsMax || sizes[i] != hostsMax && sizes[i] <= sizes[i-1] {
			return nil, fmt.Errorf("-hosts: %q: list the sizes in ascending order, max last", s)
		}
	}
	return sizes, nil
}

// podRoom is how many more pods the real nodes take: each node's
// allocatable pods (the kubelet's maxPods) less the pods bound to it that
// have not ended. Pods that request nothing, as the local runtimes' do,
// are bounded by that count alone.
func podRoom(ctx context.Context, c client.Client) (int, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{realNodeLabel: "true"}); err != nil {
		return 0, err
	}
	if len(nodes.Items) == 0 {
		return 0, fmt.Errorf("the cluster has no node labelled %s=true: start it with test/localcluster up -real-node", realNodeLabel)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return 0, err
	}
	bound := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			bound[p.Spec.NodeName]++
		}
	}
	room := 0
	for _, n := range nodes.Items {
		if q, ok := n.Status.Allocatable[corev1.ResourcePods]; ok {
			room += max(0, int(q.Value())-bound[n.Name])
		}
	}
	return room, nil
}

// runHosts times Open MPI jobs of more and more workers of one rank each
// on the real nodes, up to as many as they hold: creation → all pods
// Running, and from the launcher's command's start (once every worker
// accepts the job's connections) to every rank past MPI_Init and to
// mpirun's return, through OpenSSH and through the launch agent. runs jobs
// of each, one after another, each alone on the nodes.
func runHosts(ctx context.Context, c client.Client, cs kubernetes.Interface, ns string, o hostsOptions) error {
	room, err := podRoom(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benche2e: the real nodes take %d more pods: at most %d workers and a launcher\n", room, room-1)
	fmt.Printf("\n| workers × 1 rank, Open MPI 4.1 | remote launch | creation → all pods Running, p50 | launcher's start → every rank past MPI_Init, p50 | runs | launcher's start → mpirun returned, p50 | runs |\n")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	for _, h := range o.sizes {
		if h == hostsMax || h > room-1 {
			h = room - 1
		}
		for i, hl := range hostsLaunches {
			j := hl.job
			j.workers, j.slots = int32(h), 1
			j.env = []corev1.EnvVar{{Name: "PROBE", Value: initProbe}}
			j.script = fmt.Sprintf(`mpirun -n %d python3 -c "$PROBE"; s=$?; date +"launcher done at %%s.%%N"; exit $s`, h)
			var running, toInit, toDone []time.Duration
			for r := range o.runs {
				run, _, out, err := runScaleJob(ctx, c, cs, ns, fmt.Sprintf("hosts-%d-%d-%d", h, i, r), j)
				if err != nil {
					return err
				}
				started, err := unixTime(startedAt, out, "its start")
				if err != nil {
					return err
				}
				at, err := unixTime(pastInit, out, "its ranks past MPI_Init")
				if err != nil {
					return err
				}
				done, err := unixTime(launcherDone, out, "mpirun's return")
				if err != nil {
					return err
				}
				running = append(running, run)
				toInit = append(toInit, at.Sub(started))
				toDone = append(toDone, done.Sub(started))
				fmt.Fprintf(os.Stderr, "benche2e: hosts %d, %s, run %d: all pods Running %.2f s, launcher's start → past MPI_Init %.2f s\n",
					h, hl.label, r+1, run.Seconds(), at.Sub(started).Seconds())
			}
			fmt.Printf("| %d | %s | %.2f s | %.2f s | %s | %.2f s | %s |\n", h, hl.label,
				pct(running, 50).Seconds(), pct(toInit, 50).Seconds(), seconds(toInit), pct(toDone, 50).Seconds(), seconds(toDone))
		}
		if h == room-1 {
			break
		}
	}
	return nil
}
