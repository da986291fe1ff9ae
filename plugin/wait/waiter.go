package wait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/operatorstatus"
)

// operatorCheckInterval is how often a wait re-reads the operator's lease:
// often enough that a dead operator ends the wait within seconds of the
// lease going stale, rarely enough to cost the API server nothing.
const operatorCheckInterval = 10 * time.Second

// Waiter waits for jobs as run --wait, run --follow and wait do, and turns
// how a wait ended into the command's exit code.
type Waiter struct {
	Client client.WithWatch
	// ErrOut gets the progress line.
	ErrOut io.Writer
	// Clock dates the progress line and ticks the operator checks.
	Clock   clock.WithTicker
	Timeout time.Duration
	// Quiet: no progress line (logs are being followed on the terminal).
	Quiet bool
	// Operator says whether the Torus operator runs; nil reads its lease
	// through Client. Tests replace it.
	Operator func(context.Context) operatorstatus.Status
}

// operatorDownError ends a wait whose job cannot progress.
type operatorDownError struct{ status operatorstatus.Status }

func (e *operatorDownError) Error() string { return e.status.Message() }

// Until waits until a job reaches cond. It returns nil when it did, an
// ExitJobFailed error when the job ended otherwise, ExitTimeout when the
// timeout passed, and a plain error (exit 1) at once when the operator is
// known not to run: no job moves on without it, so waiting longer would
// only hide why.
func (w *Waiter) Until(ctx context.Context, namespace, name string, cond Condition) (*trainer.TrainJob, error) {
	if w.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.Timeout)
		defer cancel()
	}
	ctx, stop := context.WithCancelCause(ctx)
	var watchdog sync.WaitGroup
	defer watchdog.Wait()
	defer stop(nil)
	seen := make(chan struct{})
	var seenOnce sync.Once
	watchdog.Go(func() { w.watchOperator(ctx, seen, stop) })
	var progress *cmdutil.Progress
	var report func(*trainer.TrainJob)
	if !w.Quiet {
		progress = cmdutil.NewProgress(w.ErrOut)
		start := w.Clock.Now()
		report = func(tj *trainer.TrainJob) {
			st := trainjob.StateOf(tj)
			state := fmt.Sprintf("%s: %s", name, st.Phase)
			if st.Message != "" {
				state += ": " + st.Message
			}
			// The program's progress, on a terminal only: the line is
			// drawn again in place, where a log would get a line a report.
			detail := fmt.Sprintf("waiting %s for %s", duration.HumanDuration(w.Clock.Since(start)), cond)
			if p := progressOf(tj, st, w.Clock.Now()); p != "" {
				detail = p + "; " + detail
			}
			progress.UpdateState(state, " ("+detail+")")
		}
	}
	var outcome verdict
	tj, err := For(ctx, w.Client, namespace, name, func(tj *trainer.TrainJob) bool {
		var done bool
		outcome, done = settled(cond, tj)
		if !done {
			seenOnce.Do(func() { close(seen) })
		}
		return done
	}, report)
	if progress != nil {
		progress.Done()
	}
	var down *operatorDownError
	switch {
	case err != nil && errors.As(context.Cause(ctx), &down):
		return tj, cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("MPI job %s cannot progress: %s; %s", name, down.status.Message(), down.status.Fix()))
	case errors.Is(err, context.DeadlineExceeded):
		msg := fmt.Sprintf("timed out after %s waiting for MPI job %s to be %s", w.Timeout, name, cond)
		if tj != nil {
			st := trainjob.StateOf(tj)
			msg += fmt.Sprintf("; it is %s", st.Phase)
			if st.Message != "" {
				msg += ": " + st.Message
			}
		}
		return tj, cmdutil.WithCode(cmdutil.ExitTimeout, errors.New(msg))
	case errors.Is(err, errDeleted):
		return tj, fmt.Errorf("MPI job %s was deleted while waiting for it to be %s", name, cond)
	case err != nil:
		return tj, err
	}
	if outcome == unreachable {
		st := trainjob.StateOf(tj)
		switch st.Phase {
		case trainjob.PhaseFailed:
			return tj, cmdutil.WithCode(cmdutil.ExitJobFailed, fmt.Errorf("MPI job %s failed: %s", name, st.Message))
		default:
			return tj, cmdutil.WithCode(cmdutil.ExitJobFailed, fmt.Errorf("MPI job %s is %s and will not become %s", name, st.Phase, cond))
		}
	}
	return tj, nil
}

// watchOperator checks the operator once the job has been read and found
// short of the condition (a job that already reached it needs no
// operator), then every operatorCheckInterval, and stops the wait when the
// operator is known not to run. An unknown state (the lease may not be
// read, or there is none) lets the wait go on.
func (w *Waiter) watchOperator(ctx context.Context, seen <-chan struct{}, stop context.CancelCauseFunc) {
	select {
	case <-ctx.Done():
		return
	case <-seen:
	}
	check := w.Operator
	if check == nil {
		check = func(ctx context.Context) operatorstatus.Status {
			return operatorstatus.Check(ctx, w.Client, w.Clock.Now())
		}
	}
	tick := w.Clock.NewTicker(operatorCheckInterval)
	defer tick.Stop()
	for {
		if st := check(ctx); st.Down() && ctx.Err() == nil {
			stop(&operatorDownError{status: st})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// progressOf is the program's last report as the wait line shows it: its
// progress and, while the job runs, the time left; "" when it sent none.
func progressOf(tj *trainer.TrainJob, st trainjob.State, now time.Time) string {
	percent, left := job.ProgressOf(tj, st, now).Text()
	if percent == "" {
		return ""
	}
	if left != "" {
		percent += ", about " + left + " left"
	}
	return percent
}
