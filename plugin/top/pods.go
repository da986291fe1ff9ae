package top

import (
	"context"
	"strconv"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/job"
)

// jobPods reads the pods of a job as top shows them, from a glance
// (job.GlancePods): the pods it read whole, and each host it saw plainly
// running as a pod of its Table row's name and node that runs the
// containers of its role's pod read whole. The pods of one role are made
// from one Job's template, so they ask for the same resources. A job of
// thousands is then read as rows of a few dozen bytes each, not as every
// pod's several KiB. Where the glance read no pod of a running host's role
// (deleted since its row), every pod is read whole.
func jobPods(ctx context.Context, c client.Reader, tables job.PodTables, tj *trainer.TrainJob, placement mpi.Placement) ([]corev1.Pod, error) {
	g, err := job.GlancePods(ctx, c, tables, tj)
	if err != nil {
		return nil, err
	}
	like := map[string]*corev1.Pod{}
	for i := range g.Pods {
		p := &g.Pods[i]
		if r := p.Labels[api.LabelRole]; like[r] == nil {
			like[r] = p
		}
	}
	pods := g.Pods
	for _, h := range job.Hosts(placement) {
		run, ok := g.RunningOf(h.Role, h.Index)
		if !ok {
			continue
		}
		role := like[h.Role]
		if role == nil {
			return job.Pods(ctx, c, tj)
		}
		pods = append(pods, runningPod(role, run, h))
	}
	job.SortPods(pods)
	return pods, nil
}

// runningPod is a host's pod as its Table row showed it running on its
// node, with the containers of role, a pod of the same role.
func runningPod(role *corev1.Pod, run job.RunningPod, h mpi.Host) corev1.Pod {
	p := corev1.Pod{}
	p.Name, p.Namespace = run.Name, role.Namespace
	p.Labels = map[string]string{api.LabelRole: h.Role, batchv1.JobCompletionIndexAnnotation: strconv.Itoa(int(h.Index))}
	p.Spec.NodeName = run.Node
	p.Spec.Containers = role.Spec.Containers
	p.Status.Phase = corev1.PodRunning
	return p
}
