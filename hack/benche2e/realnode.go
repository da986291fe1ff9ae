package main

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// realRuns is how many jobs the real node runs, one after another.
const realRuns = 10

// localRuntime is the runtime hack/cluster installs for the real node
// (-real-node): Torus's Open MPI sample with the image built here.
const localRuntime = "torus-openmpi-local"

// realContender is what reconciles the measured jobs, and how a job is
// asked of it.
type realContender struct {
	label   string
	runtime string
	command []string
}

// torusContender runs the jobs on Torus's Open MPI runtime.
var torusContender = realContender{
	label:   "Torus (" + localRuntime + ")",
	runtime: localRuntime,
	command: []string{"mpirun", "-n", "4", "python3", "/opt/torus/pi.py", "200000"},
}

// runReal times a 2-worker Open MPI job on the real node, from its creation
// until all its ranks' pods run (launcher and both workers Running at once)
// and until it is Complete, realRuns times in a row. Each job computes pi
// with 4 real ranks; it is polled every 50 ms, which one job's few objects
// make cheap.
func runReal(ctx context.Context, c client.Client, ns string, rc realContender) error {
	var running, complete []time.Duration
	for i := range realRuns {
		name := fmt.Sprintf("real-%02d", i)
		tj := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: rc.runtime},
				Trainer: &trainer.Trainer{
					NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To[int32](2),
					Command: rc.command,
				},
			},
		}
		start := time.Now()
		if err := c.Create(ctx, tj); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
		var allRunning time.Duration
		for {
			if time.Since(start) > 3*time.Minute {
				return fmt.Errorf("%s did not complete in 3 minutes", name)
			}
			if allRunning == 0 {
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
					return err
				}
				n := 0
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodRunning {
						n++
					}
				}
				if n == 3 {
					allRunning = time.Since(start)
				}
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
				return err
			}
			if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed) {
				return fmt.Errorf("%s failed: %s", name, meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed).Message)
			}
			if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
				if allRunning == 0 {
					return fmt.Errorf("%s completed before its launcher and workers were seen Running together: poll faster", name)
				}
				complete = append(complete, time.Since(start))
				running = append(running, allRunning)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := c.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			return err
		}
		// The next job starts on an empty node.
		for {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				return err
			}
			if len(pods.Items) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	fmt.Printf("| %d jobs of 2 workers × 2 ranks on the real node, one after another | creation → launcher and workers Running, p50 | p95 | creation → Complete (pi from 4 ranks), p50 | p95 |\n", realRuns)
	fmt.Println("| --- | --- | --- | --- | --- |")
	fmt.Printf("| %s | %.2f s | %.2f s | %.2f s | %.2f s |\n", rc.label,
		pct(running, 50).Seconds(), pct(running, 95).Seconds(), pct(complete, 50).Seconds(), pct(complete, 95).Seconds())
	return nil
}
