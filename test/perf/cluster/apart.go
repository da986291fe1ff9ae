package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// apartFloor is what a size's floor needs from Torus's run when the two
// run on fresh clusters of their own: on a small machine the pods of a
// job of 16,384 workers take longer to go than to start, and the floor
// must start on empty nodes.
type apartFloor struct {
	Workers int32 `json:"workers"`
	// Torus's job, from its creation to all its pods Running, and the
	// cluster's CPU (seconds by component) and the API server's writes
	// while it started.
	TorusRunning time.Duration `json:"torusRunning"`
	TorusCPU     counts        `json:"torusCPU"`
	TorusWrites  counts        `json:"torusWrites"`
	// JobSet is the floor: the JobSet Torus made, as floorOf gives it.
	JobSet *jobsetv1alpha2.JobSet `json:"jobSet"`
}

func saveApartFloor(path string, row maximaRow, floor *jobsetv1alpha2.JobSet) error {
	raw, err := json.MarshalIndent(apartFloor{
		Workers: row.workers, TorusRunning: row.torus.running, TorusCPU: row.cpu, TorusWrites: row.writes, JobSet: floor,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return fmt.Errorf("saving the floor for its own cluster: %w", err)
	}
	return nil
}

// runApartFloor starts the floor saved by a -maxima run on another
// cluster (-save-floor) on this one, in ns, and prints it beside Torus's
// figures from that run.
func runApartFloor(ctx context.Context, c client.Client, cs kubernetes.Interface, w *watcher, ns, path, kubeconfig string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var saved apartFloor
	if err := json.Unmarshal(raw, &saved); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if saved.JobSet == nil || saved.Workers < 1 || saved.TorusRunning <= 0 {
		return fmt.Errorf("%s holds no floor of a finished run: give a file a -maxima -floor=false -save-floor run wrote", path)
	}
	floor := saved.JobSet
	floor.Namespace = ns
	running, floorCPU, floorWrites, err := startFloor(ctx, c, cs, w, kubeconfig, floor, saved.Workers)
	if err != nil {
		return err
	}
	fmt.Printf("\n## The floor on a cluster of its own\n\n"+
		"On %d cores, %s: a fresh local cluster of the same kind (%s), where the JobSet Torus made in the run above was created "+
		"directly through the same queue with its pods unchanged, so that neither start waits for the other's pods to go.\n\n",
		runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"), kwokNodesSummary(ctx, c))
	fmt.Println("| workers | Torus: all pods Running (the run above) | floor: all pods Running | ratio |")
	fmt.Println("| --- | --- | --- | --- |")
	fmt.Printf("| %d | %.1f s | %.1f s | %.2f |\n", saved.Workers, saved.TorusRunning.Seconds(), running.Seconds(),
		saved.TorusRunning.Seconds()/running.Seconds())
	fmt.Printf("\nThe API server's writes while each started: Torus's %.0f (%s); the floor's %.0f (%s).\n",
		saved.TorusWrites.total(), saved.TorusWrites, floorWrites.total(), floorWrites)
	fmt.Printf("\nThe cluster's CPU while each started, in seconds, every process of the local cluster: Torus's %.0f (%s); the floor's %.0f (%s).\n",
		saved.TorusCPU.total(), saved.TorusCPU, floorCPU.total(), floorCPU)
	return nil
}
