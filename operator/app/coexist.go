package app

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UpstreamWebhookConfiguration is the name upstream Kubeflow Trainer's
// manifests give their ValidatingWebhookConfiguration; it exists wherever
// upstream's controller is installed.
const UpstreamWebhookConfiguration = "validator.trainer.kubeflow.org"

// Reading exactly that one configuration is all Torus needs to know.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get,resourceNames=validator.trainer.kubeflow.org

// UpstreamInstalledError says that upstream's Trainer controller is installed,
// and what to remove: both would reconcile, and admit, the same TrainJobs.
type UpstreamInstalledError struct {
	// Namespace and Name are those of the Service its webhooks call, which
	// upstream's manifests give its Deployment too.
	Namespace, Name string
}

func (e *UpstreamInstalledError) Error() string {
	return fmt.Sprintf("upstream Kubeflow Trainer's controller is installed (ValidatingWebhookConfiguration %s calls Service %s/%s): "+
		"it and Torus would both reconcile every TrainJob; remove its Deployment %s/%s and its webhook configurations "+
		"(validator.trainer.kubeflow.org, defaulter.trainer.kubeflow.org) first, see docs/users/migrate.md; "+
		"on OpenShift AI set the DataScienceCluster's trainer component to Removed instead, which kubectl mpi doctor shows how to do",
		UpstreamWebhookConfiguration, e.Namespace, e.Name, e.Namespace, e.Name)
}

// CheckNoUpstreamTrainer returns an UpstreamInstalledError when upstream's
// Trainer controller is installed. A cluster that does not let Torus read
// that configuration is not refused on that ground: Torus's own webhooks
// then meet upstream's at admission (kubectl mpi doctor reports it).
func CheckNoUpstreamTrainer(ctx context.Context, c client.Reader) error {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	err := c.Get(ctx, client.ObjectKey{Name: UpstreamWebhookConfiguration}, &vwc)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return fmt.Errorf("looking for upstream Kubeflow Trainer's webhook configuration: %w", err)
	}
	e := &UpstreamInstalledError{Namespace: "?", Name: "?"}
	for _, w := range vwc.Webhooks {
		if s := w.ClientConfig.Service; s != nil {
			e.Namespace, e.Name = s.Namespace, s.Name
			break
		}
	}
	return e
}
