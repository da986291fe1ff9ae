package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// restartRuns is how many jobs the restart section loses a worker of.
const restartRuns = 5

// restartProbe is initProbe, then the ranks stay in MPI until they are
// stopped: a training losing a worker mid-run.
const restartProbe = initProbe + `
import sys
sys.stdout.flush()
time.sleep(3600)`

// runRestarts measures what the loss of a worker costs a job on the real
// nodes, restartRuns times: a 2-worker job of the launch agent (the local
// runtime's default) with no restart budget is timed from its creation to
// every rank past MPI_Init, its cold start; then a worker's pod is deleted
// and the job is timed from that moment to every rank of its second run
// past MPI_Init. Deleting a running worker's pod loses the job's world to
// something other than the program, so the restart must not spend the
// budget (the job would fail): each run checks that it did not.
func runRestarts(ctx context.Context, c client.Client, cs kubernetes.Interface, ns string) error {
	var cold, restart []time.Duration
	for i := range restartRuns {
		name := fmt.Sprintf("restart-%02d", i)
		tj := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{api.AnnotationMaxRestarts: "0"}},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: localRuntime},
				Trainer: &trainer.Trainer{
					NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To[int32](2),
					Command: []string{"mpirun", "-n", "4", "python3", "-c", restartProbe},
				},
			},
		}
		start := time.Now()
		if err := c.Create(ctx, tj); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
		first, err := untilPastInit(ctx, c, cs, ns, name, 0, start)
		if err != nil {
			return err
		}
		worker, err := podOf(ctx, c, ns, name, mpi.NodeJob, 0, "1")
		if err != nil {
			return err
		}
		lost := time.Now()
		if err := c.Delete(ctx, worker); err != nil {
			return fmt.Errorf("deleting %s's worker %s: %w", name, worker.Name, err)
		}
		second, err := untilPastInit(ctx, c, cs, ns, name, 1, lost)
		if err != nil {
			return err
		}
		var js jobsetv1alpha2.JobSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js); err != nil {
			return err
		}
		if js.Status.RestartsCountTowardsMax != 0 {
			return fmt.Errorf("%s: the worker's loss spent the restart budget (%d restarts counted)", name, js.Status.RestartsCountTowardsMax)
		}
		cold = append(cold, first.Sub(start))
		restart = append(restart, second.Sub(lost))
		if err := deleteAndDrain(ctx, c, ns, tj); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "benche2e: restart, job %d of %d done: cold %.2f s, restart %.2f s\n", i+1, restartRuns, first.Sub(start).Seconds(), second.Sub(lost).Seconds())
	}
	fmt.Printf("\n| %d jobs, 2 workers × 2 ranks, launch agent | p50 | p95 |\n", restartRuns)
	fmt.Println("| --- | --- | --- |")
	fmt.Printf("| cold start: creation → every rank past MPI_Init | %.2f s | %.2f s |\n", pct(cold, 50).Seconds(), pct(cold, 95).Seconds())
	fmt.Printf("| restart: a worker's pod deleted → every rank of the new run past MPI_Init | %.2f s | %.2f s |\n", pct(restart, 50).Seconds(), pct(restart, 95).Seconds())
	return nil
}

// untilPastInit polls the output of the launcher of a job's run until its
// ranks say they are all past MPI_Init.
func untilPastInit(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, name string, run int, start time.Time) (time.Time, error) {
	for {
		if time.Since(start) > 4*time.Minute {
			return time.Time{}, fmt.Errorf("%s's run %d did not get past MPI_Init within 4 minutes", name, run)
		}
		if launcher, err := podOf(ctx, c, ns, name, mpi.LauncherJob, run, "0"); err == nil {
			out, err := cs.CoreV1().Pods(ns).GetLogs(launcher.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err == nil && pastInit.Match(out) {
				return unixTime(pastInit, out, "its ranks past MPI_Init")
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podOf is the pod of a job's replicated job, run and completion index.
func podOf(ctx context.Context, c client.Client, ns, name, replicatedJob string, run int, index string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{
		jobsetv1alpha2.JobSetNameKey: name, jobsetv1alpha2.ReplicatedJobNameKey: replicatedJob,
		mpi.LabelJobSetRestartAttempt: strconv.Itoa(run), "batch.kubernetes.io/job-completion-index": index,
	}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp.IsZero() {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("%s has no %s pod %s of run %d", name, replicatedJob, index, run)
}
