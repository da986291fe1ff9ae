package app

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// managerContainer is the operator's container in every install (kustomize
// and the bundle's CSV).
const managerContainer = "manager"

// ownImage is the image the operator's own pod runs, which holds the launch
// agent beside the operator: jobs take it from the registry the operator
// came from. It reads the pod (its name is the host name the kubelet gives
// it) from the API server; "" where the operator runs outside a pod.
func ownImage(ctx context.Context, r client.Reader, namespace string) string {
	log := ctrl.Log.WithName("setup")
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	if namespace == "" || name == "" {
		log.Info("Not in a pod and no --launch-image: jobs asking for the launch agent will not start", "binary", mpi.LaunchImagePath)
		return ""
	}
	var pod corev1.Pod
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
		log.Error(err, "Reading the operator's own pod for its image: jobs asking for the launch agent will not start; set --launch-image", "pod", namespace+"/"+name)
		return ""
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == managerContainer || len(pod.Spec.Containers) == 1 {
			log.Info("Jobs using the launch agent take it from the operator's image", "image", c.Image)
			return c.Image
		}
	}
	log.Info("The operator's pod has no container named "+managerContainer+": jobs asking for the launch agent will not start; set --launch-image", "pod", namespace+"/"+name)
	return ""
}
