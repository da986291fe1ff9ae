package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/imagevolume"
)

// imageVolumes checks, where a runtime the user can run asks for Torus's
// image as an image volume (api.AnnotationLaunchAgentDelivery), that the
// nodes mount image volumes: on a node that does not, such a job's
// containers start without the agent and fail. It reports nothing where
// no runtime asks.
func (d *doctor) imageVolumes(ctx context.Context) (result, bool) {
	asking := d.imageVolumeRuntimes(ctx)
	if len(asking) == 0 {
		return result{}, false
	}
	r := result{Check: "Image volumes"}
	var nodes corev1.NodeList
	if err := d.Client.List(ctx, &nodes); err != nil {
		r.Status, r.Message = warn, fmt.Sprintf("jobs of %s take the launch agent from an image volume, and nodes cannot be listed to check that they mount one: %s", strings.Join(asking, ", "), firstLine(err))
		r.Fix = "ask your cluster admin whether every node runs Kubernetes 1.35 or later with containerd 2.1 or CRI-O 1.31 or later"
		return r, true
	}
	// The nodes that do not, by reason: a pool's nodes share one.
	byReason := map[string][]string{}
	without := 0
	for _, n := range nodes.Items {
		if why := imagevolume.Unsupported(n.Status.NodeInfo); why != "" {
			byReason[why] = append(byReason[why], n.Name)
			without++
		}
	}
	jobsOf := "jobs of " + strings.Join(asking, ", ")
	if without == 0 {
		r.Status, r.Message = pass, fmt.Sprintf("%s take the launch agent from an image volume, which all %d nodes mount", jobsOf, len(nodes.Items))
		return r, true
	}
	var groups []string
	for why, names := range byReason {
		sort.Strings(names)
		groups = append(groups, strings.Join(names, ", ")+" ("+why+")")
	}
	sort.Strings(groups)
	r.Status = warn
	r.Message = fmt.Sprintf("%s take the launch agent from an image volume, which %d of %d nodes do not mount: %s; their containers there start without the agent and fail",
		jobsOf, without, len(nodes.Items), strings.Join(groups, "; "))
	r.Fix = fmt.Sprintf("keep those jobs off these nodes (the runtime's nodeSelector), bring the nodes to Kubernetes 1.35 with containerd 2.1 or CRI-O 1.31, or set %s: %s on the runtimes",
		api.AnnotationLaunchAgentDelivery, api.LaunchAgentByInitContainer)
	return r, true
}

// imageVolumeRuntimes names the runtimes, cluster-wide and in the
// namespace, that ask for the image volume.
func (d *doctor) imageVolumeRuntimes(ctx context.Context) []string {
	var names []string
	var cluster trainer.ClusterTrainingRuntimeList
	if err := d.Client.List(ctx, &cluster); err == nil {
		for _, rt := range cluster.Items {
			if rt.Annotations[api.AnnotationLaunchAgentDelivery] == api.LaunchAgentByImageVolume {
				names = append(names, "ClusterTrainingRuntime "+rt.Name)
			}
		}
	}
	var local trainer.TrainingRuntimeList
	if err := d.Client.List(ctx, &local, client.InNamespace(d.Namespace)); err == nil {
		for _, rt := range local.Items {
			if rt.Annotations[api.AnnotationLaunchAgentDelivery] == api.LaunchAgentByImageVolume {
				names = append(names, "TrainingRuntime "+rt.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}
