package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// handler is what an admission webhook does with one request.
type handler interface {
	Handle(context.Context, admission.Request) admission.Response
}

// route hands each request to Torus's webhook when its object is MPI, and
// to upstream Trainer's for every other object, so that one webhook per
// path serves both and a TrainJob that is not MPI is admitted exactly as
// upstream admits it.
type route struct {
	torus, upstream handler
	// mpi tells from a request whether its object is Torus's.
	mpi func(context.Context, admission.Request) (bool, error)
	// guard, when set, refuses a request whoever would handle it.
	guard func(context.Context, admission.Request) *admission.Response
}

func (r route) Handle(ctx context.Context, req admission.Request) admission.Response {
	if r.guard != nil {
		if resp := r.guard(ctx, req); resp != nil {
			return *resp
		}
	}
	if r.upstream == nil {
		return r.torus.Handle(ctx, req)
	}
	mpi, err := r.mpi(ctx, req)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if mpi {
		return r.torus.Handle(ctx, req)
	}
	return r.upstream.Handle(ctx, req)
}

// trainJobIsMPI: a TrainJob is Torus's when its runtime is MPI, and also
// when its runtime cannot be read, so that Torus's message says how to fix
// the reference.
func trainJobIsMPI(c client.Reader) func(context.Context, admission.Request) (bool, error) {
	return func(ctx context.Context, req admission.Request) (bool, error) {
		var tj trainer.TrainJob
		if err := json.Unmarshal(req.Object.Raw, &tj); err != nil {
			return false, fmt.Errorf("decoding TrainJob %s: %w", req.Name, err)
		}
		tj.Namespace = req.Namespace
		rt, err := trainjob.GetRuntime(ctx, c, &tj)
		if refErr := (*trainjob.RuntimeRefError)(nil); errors.As(err, &refErr) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return rt.IsMPI(), nil
	}
}

// runtimeIsMPI: a runtime is Torus's when it has mlPolicy.mpi. Both runtime
// kinds share the spec, so one decoder serves both.
func runtimeIsMPI(_ context.Context, req admission.Request) (bool, error) {
	var rt struct {
		Spec trainer.TrainingRuntimeSpec `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &rt); err != nil {
		return false, fmt.Errorf("decoding %s %s: %w", req.Kind.Kind, req.Name, err)
	}
	return (&mpi.Runtime{Spec: rt.Spec}).IsMPI(), nil
}
