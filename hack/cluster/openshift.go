package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/hack/supervisor"
)

// OpenShift's pod security on the local cluster (-openshift): the
// SecurityContextConstraints API, OpenShift's standard SCCs, the
// namespaces' UID, group and MCS allocations, and OpenShift's own SCC
// admission plugin deciding every pod's creation (hack/testbin/openshift,
// served as a webhook). The controller manager creates pods as each
// controller's service account, as OpenShift's does: the SCCs a pod may use
// are its creator's and its service account's, never an administrator's.

// sccCRD is the SecurityContextConstraints CRD in OpenShift's API module.
func sccCRD() (string, error) {
	api, err := moduleDir("github.com/openshift/api", "openshift")
	if err != nil {
		return "", err
	}
	return filepath.Join(api, "security", "v1", "zz_generated.crd-manifests", "0000_03_config-operator_01_securitycontextconstraints.crd.yaml"), nil
}

// startSCCAdmission starts the SCC admission webhook and registers it for
// pods: no pod is created without its word.
func (c *cluster) startSCCAdmission(ctx context.Context) error {
	if _, err := os.Stat(c.bin("openshift-scc")); err != nil {
		return fmt.Errorf("%s is missing: run hack/testbin/build.sh openshift", c.bin("openshift-scc"))
	}
	serving, err := c.servingCert("openshift-scc")
	if err != nil {
		return err
	}
	_, ports, err := c.run(ctx, supervisor.Component{
		Name: "openshift-scc", Ports: 1,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			return supervisor.Spec{Argv: []string{c.bin("openshift-scc"), "-kubeconfig", c.kubeconfig(),
				"-listen", fmt.Sprintf("127.0.0.1:%d", p[0]), "-cert-dir", serving}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			return c.httpGet(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", p[0]))
		},
	})
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(c.ca.CAFile)
	if err != nil {
		return err
	}
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	hook := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "openshift-scc"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "security.openshift.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/pods", ports[0])), CABundle: ca,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](15),
			// Other webhooks' changes to a pod are checked again.
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}
	if err := c.client.Create(ctx, hook); err != nil {
		return fmt.Errorf("registering the SCC admission webhook: %w", err)
	}
	return nil
}
