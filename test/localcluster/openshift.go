package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// OpenShift's pod security on the local cluster (-openshift): the
// SecurityContextConstraints API, OpenShift's standard SCCs, the
// namespaces' UID, group and MCS allocations, and OpenShift's own SCC
// admission plugin deciding every pod's creation (hack/testbin/openshift,
// served as a webhook). The controller manager creates pods as each
// controller's service account, as OpenShift's does: the SCCs a pod may use
// are its creator's and its service account's, never an administrator's.

// sccAnnotation is the annotation OpenShift's SCC admission sets on a pod
// it admits: the SCC it chose.
const sccAnnotation = "openshift.io/scc"

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
	return c.awaitSCCAdmission(ctx)
}

// awaitSCCAdmission returns once the API server calls the SCC webhook: it
// calls the webhooks its informer holds, which learns of the new
// configuration a moment after the create. A pod created before then would
// be admitted without an SCC. A dry-run pod says when: the webhook either
// sets its SCC annotation or refuses it in its own name.
func (c *cluster) awaitSCCAdmission(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "scc-admission-probe", Namespace: metav1.NamespaceDefault},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
		}
		err := c.client.Create(ctx, pod, client.DryRunAll)
		switch {
		case err == nil && pod.Annotations[sccAnnotation] != "":
			return true, nil
		case err != nil && strings.Contains(err.Error(), `admission webhook "security.openshift.io"`):
			return true, nil
		case err != nil:
			last = err.Error()
		default:
			last = "a dry-run pod was admitted without an SCC"
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the API server does not call the SCC admission webhook (last: %s): %w", last, err)
	}
	return nil
}
