package upstream

import (
	"context"

	"github.com/kubeflow/trainer/v2/pkg/constants"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2ac "sigs.k8s.io/jobset/client-go/applyconfiguration/jobset/v1alpha2"
)

// Apply wires a JobSet upstream applies to the status server before it is
// applied (statusWiring); every other object goes as upstream built it.
func (c frameworkClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if js, ok := obj.(*jobsetv1alpha2ac.JobSetApplyConfiguration); ok {
		c.statusWiring(js)
	}
	return c.Client.Apply(ctx, obj, opts...)
}

// statusWiring gives the trainer pods of a job that is not MPI what
// upstream's TrainJobStatus plugin gives them (the variables, the token for
// the job's audience and the CA, under the same path), pointed at Torus's
// status server, as Torus wires an MPI job's pods. Upstream applies a
// JobSet when it makes it and while it is suspended, never once it runs:
// a running JobSet's pods keep what they were given.
func (c frameworkClient) statusWiring(js *jobsetv1alpha2ac.JobSetApplyConfiguration) {
	if c.status == nil || js.Name == nil || js.Namespace == nil || js.Spec == nil {
		return
	}
	srv := c.status()
	if srv == nil {
		return
	}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		if rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil {
			continue
		}
		// The trainer step, as upstream's plugins find it.
		if (rj.Name != nil && *rj.Name == constants.Node) || rj.Template.Labels[constants.LabelTrainJobAncestor] == constants.AncestorTrainer {
			srv.ApplyTemplate(rj.Template.Spec.Template, *js.Namespace, *js.Name)
		}
	}
}
