// Package trainjob holds what the operator and the plugin both need to know
// about a TrainJob without the operator's machinery: the runtime it refers
// to, and the conditions and reasons Torus sets on it. It imports only API
// types and a client.Reader.
package trainjob

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// RuntimeKey identifies a runtime in the index: "Kind/namespace/name", the
// namespace empty for cluster-scoped runtimes.
func RuntimeKey(kind, namespace, name string) string {
	if kind == trainer.ClusterTrainingRuntimeKind {
		namespace = ""
	}
	return kind + "/" + namespace + "/" + name
}

// RuntimeKind is the kind of the runtime a TrainJob refers to.
func RuntimeKind(tj *trainer.TrainJob) string {
	return ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
}

// RuntimeRefError is a TrainJob's runtimeRef the user must fix: the runtime
// does not exist, or the kind is not a runtime kind.
type RuntimeRefError struct {
	NotFound bool
	msg      string
}

func (e *RuntimeRefError) Error() string { return e.msg }

func runtimeNotFound(kind, name string) error {
	return &RuntimeRefError{NotFound: true, msg: fmt.Sprintf("%s %q not found: create it, or set spec.runtimeRef to an existing runtime", kind, name)}
}

// GetRuntime reads the runtime a TrainJob refers to.
func GetRuntime(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (*mpi.Runtime, error) {
	kind, name := RuntimeKind(tj), tj.Spec.RuntimeRef.Name
	switch kind {
	case trainer.ClusterTrainingRuntimeKind:
		var ctr trainer.ClusterTrainingRuntime
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &ctr); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, runtimeNotFound(kind, name)
			}
			return nil, fmt.Errorf("getting %s %q: %w", kind, name, err)
		}
		return &mpi.Runtime{Kind: kind, Name: name, Annotations: ctr.Annotations, Spec: ctr.Spec}, nil
	case trainer.TrainingRuntimeKind:
		var tr trainer.TrainingRuntime
		if err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: name}, &tr); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, runtimeNotFound(kind, name)
			}
			return nil, fmt.Errorf("getting %s %q: %w", kind, name, err)
		}
		return &mpi.Runtime{Kind: kind, Name: name, Annotations: tr.Annotations, Spec: tr.Spec}, nil
	default:
		return nil, &RuntimeRefError{msg: fmt.Sprintf("spec.runtimeRef.kind %q is not a runtime kind: use %s or %s", kind, trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind)}
	}
}
