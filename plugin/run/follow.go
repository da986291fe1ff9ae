package run

import (
	"context"
	"errors"
	"fmt"
	"io"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/logs"
	"github.com/torus-mpi/torus/plugin/wait"
)

// follow streams a job's logs to out while w waits for it to complete,
// and then reports how it ended as w.Until does.
func follow(ctx context.Context, w *wait.Waiter, kube kubernetes.Interface, out, errOut io.Writer, tj *trainer.TrainJob) (*trainer.TrainJob, error) {
	ended := make(chan struct{})
	done := make(chan error, 1)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	owner := job.NewOwner(w.Client, tj)
	go func() {
		done <- logs.Stream(lctx, kube, logs.Options{
			Namespace:     tj.Namespace,
			LabelSelector: api.LabelJobName + "=" + tj.Name,
			Prefix:        job.HostPrefix,
			Order:         job.SortPods,
			Include:       func(p *corev1.Pod) bool { return owner.Owns(lctx, p) },
			Container:     mpi.TrainerContainer,
			Follow:        true,
			Ended:         ended,
			Out:           out,
			ErrOut:        errOut,
		})
	}()
	final, err := w.Until(ctx, tj.Namespace, tj.Name, wait.Complete)
	close(ended)
	if lerr := <-done; lerr != nil && err == nil && !errors.Is(lerr, context.Canceled) {
		fmt.Fprintf(errOut, "Warning: %v\n", lerr)
	}
	return final, err
}

// awaitAll waits with w for each job in turn to complete, following its
// logs on out when follow (kube reads them), and says on w.ErrOut when each
// did and how long it ran. Its error joins every job's that did not, with
// the highest exit code among them.
func awaitAll(ctx context.Context, w *wait.Waiter, kube kubernetes.Interface, out io.Writer, jobs []*trainer.TrainJob, followLogs bool) error {
	var errs []error
	code := cmdutil.ExitOK
	for _, tj := range jobs {
		var final *trainer.TrainJob
		var err error
		if followLogs {
			final, err = follow(ctx, w, kube, out, w.ErrOut, tj)
		} else {
			final, err = w.Until(ctx, tj.Namespace, tj.Name, wait.Complete)
		}
		if err != nil {
			errs = append(errs, err)
			code = max(code, cmdutil.Code(err))
			continue
		}
		ran := ""
		if d, ok := trainjob.TimesOf(final).Duration(w.Clock.Now()); ok {
			ran = " in " + duration.HumanDuration(d)
		}
		fmt.Fprintf(w.ErrOut, "MPI job %s completed%s\n", tj.Name, ran)
	}
	if len(errs) == 0 {
		return nil
	}
	return cmdutil.WithCode(code, errors.Join(errs...))
}
