package controlplane

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CRDsEstablished returns nil once every named CRD is Established, and
// otherwise names the first that is not; callers poll it. The reader's
// scheme must know apiextensions/v1.
func CRDsEstablished(ctx context.Context, c client.Reader, names []string) error {
	for _, n := range names {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: n}, &crd); err != nil {
			return fmt.Errorf("reading CRD %s: %w", n, err)
		}
		established := false
		for _, cond := range crd.Status.Conditions {
			established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			return fmt.Errorf("CRD %s not established", n)
		}
	}
	return nil
}
