// Package startup runs the operator's one-time work at start (installing
// default runtimes, console samples) as manager runnables: once, on the
// leader, retried while the API server or the operator's own webhook, which
// admits what it writes, cannot take it yet.
package startup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// defaultBackoff retries after a second, doubling up to a minute, until the
// manager stops.
var defaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: 1 << 30}

// Task is a runnable that does its work once and returns.
type Task struct {
	// What names the work in logs and errors.
	What string
	Do   func(ctx context.Context) error
	Log  logr.Logger
	// Backoff paces retries; zero means defaultBackoff.
	Backoff wait.Backoff
	// Quiet logs the retries at V(1): waiting is the expected state.
	Quiet bool
}

// NeedLeaderElection: one replica does the work.
func (t *Task) NeedLeaderElection() bool { return true }

// Start does the work, retrying until it succeeds or ctx ends.
func (t *Task) Start(ctx context.Context) error {
	b := t.Backoff
	if b.Steps == 0 {
		b = defaultBackoff
	}
	err := wait.ExponentialBackoffWithContext(ctx, b, func(ctx context.Context) (bool, error) {
		if err := t.Do(ctx); err != nil {
			var p permanent
			if errors.As(err, &p) {
				return false, p.err
			}
			log := t.Log
			if t.Quiet {
				log = log.V(1)
			}
			log.Info("Not done yet; retrying", "what", t.What, "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", t.What, err)
	}
	return nil
}

// permanent is an error of a Task's work that retrying cannot cure.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

// SCCKind is OpenShift's SecurityContextConstraints. Where it is served,
// their admission decides every pod's user and volumes: restricted-v2
// assigns a UID from the namespace's range, and admits no image volume.
var SCCKind = schema.GroupKind{Group: "security.openshift.io", Kind: "SecurityContextConstraints"}

// Served reports whether the API server serves a kind (at one of versions,
// or any). Torus adapts to what the cluster has: Kueue, Multus, OpenShift's
// SCCs, console and the Prometheus Operator.
func Served(mapper meta.RESTMapper, gk schema.GroupKind, versions ...string) (bool, error) {
	_, err := mapper.RESTMapping(gk, versions...)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("looking up %s: %w", gk, err)
}

// applyIfServed server-side applies the objects objs makes, as
// fieldManager and owning their fields, where the cluster serves the API
// of kind; elsewhere it does nothing. Other projects' kinds (OpenShift's
// console, the Prometheus Operator) are applied this way rather than
// shipped in the OLM bundle, where a kind a cluster lacks fails the whole
// install.
func applyIfServed(ctx context.Context, c client.Client, mapper meta.RESTMapper, kind schema.GroupVersionKind,
	fieldManager string, log logr.Logger, objs func() ([]*unstructured.Unstructured, error)) error {
	if ok, err := Served(mapper, kind.GroupKind(), kind.Version); err != nil {
		return err
	} else if !ok {
		log.V(1).Info("API not served: nothing to apply", "kind", kind.String())
		return nil
	}
	list, err := objs()
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range list {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			errs = append(errs, fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// Applier applies another project's kinds where the cluster serves them
// (applyIfServed), once at start.
type Applier struct {
	Client client.Client
	Mapper meta.RESTMapper
	// Kind is the kind whose API must be served.
	Kind         schema.GroupVersionKind
	FieldManager string
	Objects      func() ([]*unstructured.Unstructured, error)
	// What names the work in logs and errors.
	What    string
	Log     logr.Logger
	Backoff wait.Backoff
}

// Install applies the objects once.
func (a *Applier) Install(ctx context.Context) error {
	return applyIfServed(ctx, a.Client, a.Mapper, a.Kind, a.FieldManager, a.Log, a.Objects)
}

// Runnable is the applier as a manager runnable: once, on the leader,
// retried until done.
func (a *Applier) Runnable() *Task {
	return &Task{What: a.What, Do: a.Install, Log: a.Log, Backoff: a.Backoff}
}

// Gate holds back part of the operator until what it needs is there, and
// says why as a health check: the controllers wait for JobSet's API while
// the webhooks serve.
type Gate struct {
	waiting atomic.Pointer[string]
}

// Wait records why the gated part does not run yet; a nil Gate records
// nothing.
func (g *Gate) Wait(reason string) {
	if g != nil {
		g.waiting.Store(&reason)
	}
}

// Open records that the gated part runs.
func (g *Gate) Open() {
	if g != nil {
		g.waiting.Store(nil)
	}
}

// Check is a healthz.Checker: an error with the reason while waiting.
func (g *Gate) Check(*http.Request) error {
	if r := g.waiting.Load(); r != nil {
		return errors.New(*r)
	}
	return nil
}

// WhenServed is a runnable that, on the leader, waits until the API server
// serves a kind and then runs start (which may add controllers to the
// running manager), holding gate shut until then (nil: an optional API,
// which holds nothing back).
func WhenServed(mapper meta.RESTMapper, kind schema.GroupVersionKind, every time.Duration, gate *Gate, log logr.Logger,
	start func(context.Context) error) *Task {
	gate.Wait(fmt.Sprintf("waiting for the API server to serve %s (%s): install it; the controllers start once it is served", kind.Kind, kind.GroupVersion()))
	return &Task{
		What:  "starting what needs " + kind.Kind,
		Log:   log,
		Quiet: true,
		// Poll evenly: the wait ends when an administrator installs it.
		Backoff: wait.Backoff{Duration: every, Factor: 1, Steps: 1 << 30},
		Do: func(ctx context.Context) error {
			ok, err := Served(mapper, kind.GroupKind(), kind.Version)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s (%s) is not served yet", kind.Kind, kind.GroupVersion())
			}
			if err := start(ctx); err != nil {
				// Not retried: set-up errors are the operator's own.
				return permanent{err}
			}
			gate.Open()
			log.Info("API served; what waited for it has started", "kind", kind.String())
			return nil
		},
	}
}
