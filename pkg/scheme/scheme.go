// Package scheme builds the runtime.Scheme Torus's operator and plugin use:
// Kubernetes, Trainer, JobSet, Kueue, Multus, the PodGroups of the
// coscheduling and Volcano schedulers (which upstream Trainer's plugins
// create for jobs that ask for them) and Torus's own types.
package scheme

import (
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
)

// New returns a scheme with every API group Torus reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(trainer.AddToScheme(s))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(s))
	utilruntime.Must(kueuev1beta2.AddToScheme(s))
	utilruntime.Must(torusv1alpha1.AddToScheme(s))
	utilruntime.Must(nadv1.AddToScheme(s))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(s))
	utilruntime.Must(volcanov1beta1.AddToScheme(s))
	return s
}
