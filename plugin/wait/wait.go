// Package wait is kubectl mpi wait, and the watch behind run --wait and
// --follow, logs -f and delete --wait: it watches an MPI job until it
// reaches a state. Waiter adds what the commands show and return: the
// progress line, the stop when the operator is down, and exit codes.
package wait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	apiwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/job"
)

// Condition is what wait --for=condition=X waits for.
type Condition string

const (
	Complete = Condition(trainer.TrainJobComplete)
	Failed   = Condition(trainer.TrainJobFailed)
	Running  = Condition(trainjob.ConditionRunning)
)

// allConditions lists the conditions wait accepts.
var allConditions = []Condition{Complete, Failed, Running}

// parseFor reads --for=condition=X (X case-insensitive).
func parseFor(s string) (Condition, error) {
	const prefix = "condition="
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		for _, c := range allConditions {
			if strings.EqualFold(s[len(prefix):], string(c)) {
				return c, nil
			}
		}
	}
	return "", fmt.Errorf("--for=%q: use condition=Complete, condition=Failed or condition=Running", s)
}

// verdict is how a wait ended.
type verdict int

const (
	// reached: the job reached the condition.
	reached verdict = iota
	// unreachable: the job ended in a state that rules the condition out
	// (it failed while waiting for Complete or Running, or completed while
	// waiting for Failed).
	unreachable
)

// settled says whether a job state settles a wait for cond.
func settled(cond Condition, tj *trainer.TrainJob) (verdict, bool) {
	st := trainjob.StateOf(tj)
	switch cond {
	case Complete:
		switch st.Phase {
		case trainjob.PhaseComplete:
			return reached, true
		case trainjob.PhaseFailed:
			return unreachable, true
		}
	case Failed:
		switch st.Phase {
		case trainjob.PhaseFailed:
			return reached, true
		case trainjob.PhaseComplete:
			return unreachable, true
		}
	case Running:
		// A job that completed has run, even when its Running condition
		// was too short to be seen.
		switch st.Phase {
		case trainjob.PhaseRunning, trainjob.PhaseComplete:
			return reached, true
		case trainjob.PhaseFailed:
			return unreachable, true
		}
	}
	return 0, false
}

// errDeleted says the job went away while being waited for.
var errDeleted = errors.New("the job was deleted while waiting")

// For watches a TrainJob until check settles (returns done) or ctx ends.
// progress, when set, is called with the latest object on every change and
// every second, to show what is being waited for.
func For(ctx context.Context, c client.WithWatch, namespace, name string, check func(*trainer.TrainJob) bool, progress func(*trainer.TrainJob)) (*trainer.TrainJob, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last *trainer.TrainJob
	for {
		tj, err := job.Get(ctx, c, namespace, name)
		if err != nil {
			var nf *job.NotFoundError
			if last != nil && errors.As(err, &nf) {
				return last, errDeleted
			}
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return nil, err
		}
		last = tj
		if progress != nil {
			progress(tj)
		}
		if check(tj) {
			return tj, nil
		}
		w, err := c.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: tj.ResourceVersion, AllowWatchBookmarks: true}})
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, fmt.Errorf("watching MPI job %s/%s: %w", namespace, name, err)
		}
		done, result, err := consume(ctx, w, tick.C, check, progress, &last)
		w.Stop()
		if done {
			return result, err
		}
		// The watch ended (timeout, expired resource version): read again.
	}
}

func consume(ctx context.Context, w watch.Interface, tick <-chan time.Time, check func(*trainer.TrainJob) bool, progress func(*trainer.TrainJob), last **trainer.TrainJob) (bool, *trainer.TrainJob, error) {
	for {
		select {
		case <-ctx.Done():
			return true, *last, ctx.Err()
		case <-tick:
			if progress != nil && *last != nil {
				progress(*last)
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				tj, ok := ev.Object.(*trainer.TrainJob)
				if !ok {
					continue
				}
				*last = tj
				if progress != nil {
					progress(tj)
				}
				if check(tj) {
					return true, tj, nil
				}
			case watch.Deleted:
				return true, *last, errDeleted
			case watch.Error:
				return false, nil, nil
			}
		}
	}
}

// gone waits until a TrainJob no longer exists; it returns ctx's error
// when ctx ends first.
func gone(ctx context.Context, c client.Reader, namespace, name string) error {
	return apiwait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var tj trainer.TrainJob
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &tj)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil && ctx.Err() == nil:
			return false, fmt.Errorf("waiting for MPI job %s/%s to be deleted: %w", namespace, name, err)
		}
		return false, nil
	})
}

// Deleted waits until every job is gone, with a progress line on errOut,
// for at most timeout (0: no limit), failing with ExitTimeout when it
// runs out.
func Deleted(ctx context.Context, c client.Reader, errOut io.Writer, jobs []*trainer.TrainJob, timeout time.Duration) error {
	if len(jobs) == 0 {
		return nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	progress := cmdutil.NewProgress(errOut)
	defer progress.Done()
	for _, tj := range jobs {
		progress.Update("waiting for %s to be deleted", tj.Name)
		if err := gone(ctx, c, tj.Namespace, tj.Name); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return cmdutil.WithCode(cmdutil.ExitTimeout, fmt.Errorf("timed out after %s waiting for MPI job %s to be deleted", timeout, tj.Name))
			}
			return err
		}
	}
	return nil
}
