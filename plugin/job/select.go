package job

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
)

// Selector selects MPI TrainJobs (the label Torus's webhook sets on them)
// within a user's label selector, "" for all of them.
func Selector(user string) (labels.Selector, error) {
	sel := labels.Everything()
	if user != "" {
		var err error
		if sel, err = labels.Parse(user); err != nil {
			return nil, err
		}
	}
	req, err := labels.NewRequirement(api.LabelImplementation, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	return sel.Add(*req), nil
}

// List returns the MPI TrainJobs of a namespace.
func List(ctx context.Context, c client.Reader, namespace string) ([]*trainer.TrainJob, error) {
	sel, err := Selector("")
	if err != nil {
		return nil, err
	}
	var list trainer.TrainJobList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing MPI jobs: %w", err)
	}
	out := make([]*trainer.TrainJob, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
