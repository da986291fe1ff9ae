package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// metricsServer is the metrics API (-metrics-server): metrics-server
// scraping every node's kubelet resource metrics, behind the API server's
// aggregation layer, as most clusters serve kubectl top. Kubectl mpi top
// then reads a job's usage in one list instead of every node's kubelet.
type metricsServer struct{ c *cluster }

func (m metricsServer) on() bool {
	if m.c.metricsServer {
		return true
	}
	_, ok := m.c.pids()[metricsServerName]
	return ok
}

func (m metricsServer) steps(s stage) []step {
	if s == workloads {
		return []step{{"metrics-server", m.c.startMetricsServer}}
	}
	return nil
}

func (m metricsServer) components() map[string][]string {
	return map[string][]string{metricsServerName: {metricsServerName}}
}

const (
	metricsServerName = "metrics-server"
	// metricsAPIService is the metrics API's group version as the
	// aggregation layer names it.
	metricsAPIService = "v1beta1.metrics.k8s.io"
	// frontProxyClient is the identity the API server proxies to
	// aggregated API servers as; they trust the users it names in its
	// request headers only from a client certificate of that name.
	frontProxyClient = "front-proxy-client"
)

// frontProxyFlags are the API server's flags for the aggregation layer:
// the client certificate it proxies with, and the CA and name that
// aggregated servers check it by (kubeadm's front-proxy settings, with the
// local CA as the front proxy's).
func (c *cluster) frontProxyFlags() ([]string, error) {
	dir := filepath.Join(c.ca.Dir, frontProxyClient)
	if err := c.ca.ClientCert(dir, frontProxyClient); err != nil {
		return nil, err
	}
	return []string{
		"--requestheader-client-ca-file=" + c.ca.CAFile,
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + filepath.Join(dir, "tls.crt"),
		"--proxy-client-key-file=" + filepath.Join(dir, "tls.key"),
		// The API server dials the endpoint the metrics API's Service
		// names: there is no kube-proxy behind Service addresses.
		"--enable-aggregator-routing=true",
	}, nil
}

// startMetricsServer runs metrics-server on kwok's address (an aggregated
// API's endpoint may not be a loopback address), registers it as the
// metrics API and waits until the API server serves that API.
func (c *cluster) startMetricsServer(ctx context.Context) error {
	addr := c.kwokAddress
	dir := filepath.Join(c.ca.Dir, metricsServerName)
	if err := c.ca.ServingCertFor(dir, metricsServerName, []net.IP{net.ParseIP(addr)}, "metrics-server.kube-system.svc"); err != nil {
		return err
	}
	_, ports, err := c.run(ctx, supervisor.Component{
		Name: metricsServerName, Ports: 1, Timeout: 90 * time.Second,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			return supervisor.Spec{Argv: []string{
				c.bin(metricsServerName),
				"--kubeconfig=" + c.kubeconfig(),
				"--authentication-kubeconfig=" + c.kubeconfig(),
				"--authorization-kubeconfig=" + c.kubeconfig(),
				"--bind-address=" + addr, "--secure-port=" + strconv.Itoa(p[0]),
				"--tls-cert-file=" + filepath.Join(dir, "tls.crt"),
				"--tls-private-key-file=" + filepath.Join(dir, "tls.key"),
				// kwok's serving certificate is the local CA's, for its
				// address (startKwok).
				"--kubelet-certificate-authority=" + c.ca.CAFile,
				"--kubelet-preferred-address-types=InternalIP",
				"--kubelet-use-node-status-port",
				// metrics-server's own default.
				"--metric-resolution=15s",
			}}, nil
		},
		// Ready once it has scraped the nodes: readyz waits for its
		// first metrics.
		Ready: func(ctx context.Context, p []int) error {
			return c.httpGet(ctx, fmt.Sprintf("https://%s/readyz", net.JoinHostPort(addr, strconv.Itoa(p[0]))))
		},
	})
	if err != nil {
		return err
	}
	for _, o := range metricsAPIObjects(addr, ports[0], c.ca.CAPEM()) {
		if err := c.apply(ctx, o); err != nil {
			return fmt.Errorf("registering the metrics API: %w", err)
		}
	}
	return c.waitFor(ctx, metricsServerName, 60*time.Second, c.metricsAPIAvailable)
}

// metricsAPIObjects register metrics-server at addr:port as the metrics
// API: a Service without a selector, its EndpointSlice, and the
// APIService that names them, trusting metrics-server's certificate by
// the local CA.
func metricsAPIObjects(addr string, port int, caPEM []byte) []*unstructured.Unstructured {
	const ns, name = "kube-system", metricsServerName
	labels := map[string]any{"app.kubernetes.io/managed-by": string(fieldOwner)}
	return []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"namespace": ns, "name": name, "labels": labels},
			"spec": map[string]any{"ports": []any{map[string]any{
				"name": "https", "port": int64(443), "targetPort": int64(port), "protocol": "TCP",
			}}},
		}},
		{Object: map[string]any{
			"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"namespace": ns, "name": name, "labels": map[string]any{
				"kubernetes.io/service-name":             name,
				"endpointslice.kubernetes.io/managed-by": string(fieldOwner),
				"app.kubernetes.io/managed-by":           string(fieldOwner),
			}},
			"addressType": "IPv4",
			"endpoints": []any{map[string]any{
				"addresses":  []any{addr},
				"conditions": map[string]any{"ready": true},
			}},
			"ports": []any{map[string]any{"name": "https", "port": int64(port), "protocol": "TCP"}},
		}},
		{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": metricsAPIService, "labels": labels},
			"spec": map[string]any{
				"group": "metrics.k8s.io", "version": "v1beta1",
				"service":              map[string]any{"namespace": ns, "name": name, "port": int64(443)},
				"caBundle":             base64.StdEncoding.EncodeToString(caPEM),
				"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			},
		}},
	}
}

// metricsAPIAvailable: the aggregation layer reached metrics-server and
// serves the metrics API.
func (c *cluster) metricsAPIAvailable(ctx context.Context) error {
	var svc unstructured.Unstructured
	svc.SetAPIVersion("apiregistration.k8s.io/v1")
	svc.SetKind("APIService")
	if err := c.client.Get(ctx, client.ObjectKey{Name: metricsAPIService}, &svc); err != nil {
		return err
	}
	conditions, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
	for _, cond := range conditions {
		m, _ := cond.(map[string]any)
		if m["type"] == "Available" {
			if m["status"] == "True" {
				return nil
			}
			return fmt.Errorf("the metrics API is not available: %v: %v", m["reason"], m["message"])
		}
	}
	return fmt.Errorf("the metrics API has no Available condition yet")
}
