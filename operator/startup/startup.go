// Package startup runs the operator's one-time work at start (installing
// default runtimes, console samples) as manager runnables: once, on the
// leader, retried while the API server or the operator's own webhook, which
// admits what it writes, cannot take it yet.
package startup

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultBackoff retries after a second, doubling up to a minute, until the
// manager stops.
var DefaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: 1 << 30}

// Task is a runnable that does its work once and returns.
type Task struct {
	// What names the work in logs and errors.
	What string
	Do   func(ctx context.Context) error
	Log  logr.Logger
	// Backoff paces retries; zero means DefaultBackoff.
	Backoff wait.Backoff
}

// NeedLeaderElection: one replica does the work.
func (t *Task) NeedLeaderElection() bool { return true }

// Start does the work, retrying until it succeeds or ctx ends.
func (t *Task) Start(ctx context.Context) error {
	b := t.Backoff
	if b.Steps == 0 {
		b = DefaultBackoff
	}
	err := wait.ExponentialBackoffWithContext(ctx, b, func(ctx context.Context) (bool, error) {
		if err := t.Do(ctx); err != nil {
			t.Log.Info("Not done yet; retrying", "what", t.What, "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", t.What, err)
	}
	return nil
}
