// Package upstreamtrainer runs upstream Kubeflow Trainer's controller
// (trainer-controller-manager, built by hack/testbin) beside a loopback
// control plane, for the benchmark and the drop-in comparison: the
// Configuration upstream ships, changed only where a loopback run needs it.
package upstreamtrainer

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Module is the Go module upstream's controller, CRDs and manifests ship in.
const Module = "github.com/kubeflow/trainer/v2"

// ShippedConfig is upstream's Configuration in its module directory.
func ShippedConfig(moduleDir string) string {
	return filepath.Join(moduleDir, "manifests", "base", "manager", "controller_manager_config.yaml")
}

// Options are what a loopback run changes in the shipped Configuration.
type Options struct {
	// HealthPort, MetricsPort, WebhookPort and StatusServerPort are bound
	// on 127.0.0.1 (the status server only with the TrainJobStatus
	// feature).
	HealthPort, MetricsPort, WebhookPort, StatusServerPort int
	// LeaderElectionNamespace holds the lease: there is no pod namespace
	// to default to. Empty turns leader election off.
	LeaderElectionNamespace string
	// QPS and Burst, when set, replace upstream's client defaults.
	QPS   float32
	Burst int
}

// WriteConfig writes the shipped Configuration, changed as o says, to path.
// Certificate management is always off: it manages a Secret and webhook
// configurations for an in-cluster Service; a loopback run supplies its
// serving certificate in $TMPDIR/k8s-webhook-server/serving-certs.
func WriteConfig(shipped, path string, o Options) error {
	data, err := os.ReadFile(shipped)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing %s: %w", shipped, err)
	}
	section := func(name string) map[string]any {
		m, ok := cfg[name].(map[string]any)
		if !ok {
			m = map[string]any{}
			cfg[name] = m
		}
		return m
	}
	section("health")["healthProbeBindAddress"] = fmt.Sprintf("127.0.0.1:%d", o.HealthPort)
	section("metrics")["bindAddress"] = fmt.Sprintf("127.0.0.1:%d", o.MetricsPort)
	section("webhook")["host"] = "127.0.0.1"
	section("webhook")["port"] = o.WebhookPort
	if o.LeaderElectionNamespace != "" {
		section("leaderElection")["resourceNamespace"] = o.LeaderElectionNamespace
	} else {
		section("leaderElection")["leaderElect"] = false
	}
	section("certManagement")["enable"] = false
	section("statusServer")["port"] = o.StatusServerPort
	if o.QPS > 0 {
		section("clientConnection")["qps"] = o.QPS
		section("clientConnection")["burst"] = o.Burst
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
