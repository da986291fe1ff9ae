package job

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
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

// HostsSelector selects the pods of a job's hosts (nil: every host) by
// their labels: the job's, and for chosen hosts their roles and the
// completion indexes the Job controller labels each pod with, so that the
// API server reads the hosts' pods rather than all of a large job's.
// Where roles and indexes cross (the launcher and worker 1 also select
// worker 0), OfHosts picks among the pods.
func HostsSelector(name string, hosts []mpi.Host) (string, error) {
	sel := labels.SelectorFromSet(labels.Set{api.LabelJobName: name})
	if len(hosts) == 0 {
		return sel.String(), nil
	}
	roles, indexes := sets.New[string](), sets.New[string]()
	for _, h := range hosts {
		roles.Insert(h.Role)
		indexes.Insert(strconv.Itoa(int(h.Index)))
	}
	role, err := labels.NewRequirement(api.LabelRole, selection.In, sets.List(roles))
	if err != nil {
		return "", fmt.Errorf("selecting the pods of %s: %w", name, err)
	}
	index, err := labels.NewRequirement(batchv1.JobCompletionIndexAnnotation, selection.In, sets.List(indexes))
	if err != nil {
		return "", fmt.Errorf("selecting the pods of %s: %w", name, err)
	}
	return sel.Add(*role, *index).String(), nil
}

// OfHosts picks the pods of hosts; nil picks every pod.
func OfHosts(hosts []mpi.Host) func(*corev1.Pod) bool {
	if len(hosts) == 0 {
		return func(*corev1.Pod) bool { return true }
	}
	return func(p *corev1.Pod) bool {
		of := HostOf(p)
		return slices.ContainsFunc(hosts, func(h mpi.Host) bool { return h.Role == of.Role && h.Index == of.Index })
	}
}
