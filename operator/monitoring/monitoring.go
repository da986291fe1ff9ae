// Package monitoring has the Prometheus Operator scrape the Torus operator
// and evaluate its alerts: where the cluster serves monitoring.coreos.com
// (OpenShift's cluster monitoring, kube-prometheus), the operator applies a
// ServiceMonitor for its metrics Service and the PrometheusRule in
// prometheusrule.yaml to its own namespace when it starts.
//
// The operator applies them, on every install path, rather than the OLM
// bundle carrying them: a bundle object whose API a cluster lacks fails the
// whole install, and the bundle also serves clusters without the Prometheus
// Operator. The scraper's ServiceAccount needs ClusterRole
// torus-mpi-metrics-reader (kustomize/userroles binds OpenShift's
// prometheus-k8s to it).
package monitoring

import (
	_ "embed"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/operator/startup"
)

// FieldManager owns the fields the operator writes in monitoring objects.
const FieldManager = "torus-operator-monitoring"

// Name names the ServiceMonitor and the PrometheusRule.
const Name = "torus-operator"

// metricsService is the operator's metrics Service (kustomize/manager), and
// MetricsPort its port's name.
const (
	metricsService = "torus-operator-metrics"
	MetricsPort    = "https-metrics"
)

// prometheusRule is the alerts, as a PrometheusRule without namespace;
// hack/rulecheck loads it with Prometheus's own parser.
//
//go:embed prometheusrule.yaml
var prometheusRule []byte

var serviceMonitorKind = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=create;patch,namespace=torus-system

// Installer applies the ServiceMonitor and the PrometheusRule to the
// operator's namespace once the manager runs (as leader), if the cluster
// serves their API.
func Installer(c client.Client, mapper meta.RESTMapper, namespace string, log logr.Logger) *startup.Applier {
	return &startup.Applier{Client: c, Mapper: mapper, Kind: serviceMonitorKind, FieldManager: FieldManager,
		Objects: func() ([]*unstructured.Unstructured, error) { return Objects(namespace) },
		What:    "installing the ServiceMonitor and alerts", Log: log}
}

// Objects are the ServiceMonitor and the PrometheusRule for the operator in
// namespace.
func Objects(namespace string) ([]*unstructured.Unstructured, error) {
	rule := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(prometheusRule, &rule.Object); err != nil {
		return nil, fmt.Errorf("decoding the PrometheusRule: %w", err)
	}
	rule.SetNamespace(namespace)
	labels := map[string]any{"app.kubernetes.io/name": "torus", "app.kubernetes.io/component": "operator"}
	sm := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": Name, "namespace": namespace, "labels": labels},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": labels},
			"endpoints": []any{map[string]any{
				"port": MetricsPort, "scheme": "https", "path": "/metrics", "interval": "30s",
				// The operator authorizes the scraper's token
				// (TokenReview, SubjectAccessReview); its serving
				// certificate is its own, self-signed.
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
				"tlsConfig":       map[string]any{"insecureSkipVerify": true},
			}},
		},
	}}
	sm.SetGroupVersionKind(serviceMonitorKind)
	return []*unstructured.Unstructured{sm, rule}, nil
}
