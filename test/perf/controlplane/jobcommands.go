package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// jobCommand is one command on one job, timed.
type jobCommand struct {
	Label string
	Runs  []time.Duration
}

// jobCommands times the plugin's commands on one job among the batch's,
// beside kubectl's own describe: they must stay fast however many jobs the
// cluster holds.
type jobCommands struct {
	Job      string
	Commands []jobCommand
}

// measureJobCommands finishes one job of the batch as the JobSet controller
// would (no JobSet controller runs here), waits for Torus to report it
// Complete, then runs describe and wait on it, alternating, straight to the
// API server.
func measureJobCommands(ctx context.Context, cp *controlPlane, bins binaries, dir, job string) (*jobCommands, error) {
	if err := completeJobSet(ctx, cp.client, nsBench, mpi.JobSetName(job)); err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: nsBench, Name: job}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var tj trainer.TrainJob
		if err := cp.client.Get(ctx, key, &tj); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), nil
	})
	if err != nil {
		return nil, fmt.Errorf("TrainJob %s was not reported Complete after its JobSet completed: %w", job, err)
	}
	kubeconfig, err := directKubeconfig(cp, dir)
	if err != nil {
		return nil, err
	}
	kubectl := filepath.Join(bins.testbin, "kubectl")
	commands := []struct {
		label string
		argv  []string
		want  string // in the output, so that a command that printed nothing fails
	}{
		{"`kubectl mpi describe`", []string{bins.plugin, "--kubeconfig", kubeconfig, "-n", nsBench, "describe", job}, job},
		{"`kubectl mpi wait --for=condition=Complete`", []string{bins.plugin, "--kubeconfig", kubeconfig, "-n", nsBench, "wait", job, "--for=condition=Complete", "--timeout", "30s"}, job},
		{"`kubectl describe trainjob`", []string{kubectl, "--kubeconfig", kubeconfig, "-n", nsBench, "describe", "trainjob", job}, job},
	}
	out := &jobCommands{Job: job}
	for _, c := range commands {
		out.Commands = append(out.Commands, jobCommand{Label: c.label})
	}
	for range listRuns {
		for i, c := range commands {
			d, err := timeCommand(ctx, c.argv, c.want)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.label, err)
			}
			out.Commands[i].Runs = append(out.Commands[i].Runs, d)
		}
	}
	return out, nil
}

// completeJobSet writes the status the JobSet controller writes when a
// JobSet's launcher has succeeded.
func completeJobSet(ctx context.Context, c client.Client, ns, name string) error {
	var js jobsetv1alpha2.JobSet
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js); err != nil {
		return fmt.Errorf("reading JobSet %s: %w", name, err)
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{
			Name: rj.Name, Succeeded: rj.Replicas,
		})
	}
	meta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{
		Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
		Reason: "AllJobsCompleted", Message: "jobset completed successfully",
	})
	if err := c.Status().Update(ctx, &js); err != nil {
		return fmt.Errorf("completing JobSet %s: %w", name, err)
	}
	return nil
}

// timeCommand runs a command to its end and checks that it succeeded and
// printed want.
func timeCommand(ctx context.Context, argv []string, want string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	d := time.Since(start)
	if !strings.Contains(stdout.String(), want) {
		return 0, fmt.Errorf("its output does not name %s: %q", want, stdout.String())
	}
	return d, nil
}
