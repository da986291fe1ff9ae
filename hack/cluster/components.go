package main

import (
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/hack/controlplane"
	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/hack/supervisor"
)

func (c *cluster) startEtcd(ctx context.Context) error {
	_, _, err := c.run(ctx, supervisor.Component{
		Name: "etcd", Ports: 2, Timeout: 30 * time.Second,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			// A retry starts on an empty data directory: a half-started
			// member's would name the old peer port.
			dataDir := filepath.Join(c.dir, "etcd")
			if err := os.RemoveAll(dataDir); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{Argv: controlplane.EtcdArgs(c.bin("etcd"), "torus", dataDir, p[0], p[1])}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			return c.httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", p[0]))
		},
	})
	return err
}

// auditPolicy is what the local cluster's API server records.
//
//go:embed audit-policy.yaml
var auditPolicy []byte

func (c *cluster) startAPIServer(ctx context.Context) error {
	etcd := c.ports["etcd"][0]
	_, ports, err := c.run(ctx, supervisor.Component{
		Name: "kube-apiserver", Ports: 1,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			flags := []string{
				"--allow-privileged=true",
				// kwok's kubelet endpoint, for logs, exec and metrics through the API.
				"--kubelet-preferred-address-types=InternalIP",
				// Pods that ask for GPUs tolerate the GPU nodes' taint, as
				// on clouds that taint their GPU nodes (see gpuTaint).
				"--enable-admission-plugins=ExtendedResourceToleration",
			}
			// Who created, changed or deleted which job (audit-policy.yaml),
			// in logs/audit.log as JSON lines.
			policy := filepath.Join(c.dir, "config", "audit-policy.yaml")
			if err := os.WriteFile(policy, auditPolicy, 0o644); err != nil {
				return supervisor.Spec{}, err
			}
			flags = append(flags, "--audit-policy-file="+policy, "--audit-log-path="+filepath.Join(c.dir, "logs", "audit.log"),
				"--audit-log-format=json", "--audit-log-maxsize=100", "--audit-log-maxbackup=1")
			if c.realNode {
				// Webhooks served by pods (an operator installed by OLM)
				// are called at their endpoints: there is no kube-proxy
				// behind Service addresses.
				flags = append(flags, "--enable-aggregator-routing=true")
			}
			argv, err := controlplane.APIServerArgs(c.bin("kube-apiserver"), c.ca, etcd, p[0], c.apiAddress(), flags...)
			return supervisor.Spec{Argv: argv}, err
		},
		Ready: func(ctx context.Context, p []int) error {
			return c.httpGet(ctx, fmt.Sprintf("https://%s:%d/readyz", c.apiAddress(), p[0]))
		},
	})
	if err != nil {
		return err
	}
	return c.writeKubeconfig(ports[0])
}

// startControllers starts kube-controller-manager and kube-scheduler, each
// serving /healthz on a port of its own with a certificate of the local CA
// (always allowed without credentials), which is their readiness check.
func (c *cluster) startControllers(ctx context.Context) error {
	for _, comp := range []struct {
		name  string
		flags []string
	}{
		{"kube-controller-manager", []string{
			"--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
			"--service-account-private-key-file=" + filepath.Join(c.ca.Dir, "sa.key"),
			"--root-ca-file=" + c.ca.CAFile,
			// kwok pods never run a kubelet: evict nothing for lost heartbeats.
			"--node-monitor-grace-period=1h",
			// The defaults (20 QPS, 5 Job workers) make hundreds of pods
			// queue for tens of seconds behind the client rate limiter.
			"--kube-api-qps=300", "--kube-api-burst=600", "--concurrent-job-syncs=20",
			// Pods are created as the Job controller's service account, as
			// on OpenShift, whose SCCs are decided by who creates a pod.
			fmt.Sprintf("--use-service-account-credentials=%t", c.openshift),
		}},
		{"kube-scheduler", []string{"--kube-api-qps=300", "--kube-api-burst=600"}},
	} {
		serving, err := c.servingCert(comp.name)
		if err != nil {
			return err
		}
		if _, _, err := c.run(ctx, supervisor.Component{
			Name: comp.name, Ports: 1,
			Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
				return supervisor.Spec{Argv: append([]string{
					c.bin(comp.name), "--kubeconfig=" + c.kubeconfig(),
					"--authentication-kubeconfig=" + c.kubeconfig(), "--authorization-kubeconfig=" + c.kubeconfig(),
					"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(p[0]),
					"--tls-cert-file=" + filepath.Join(serving, "tls.crt"),
					"--tls-private-key-file=" + filepath.Join(serving, "tls.key"),
					"--leader-elect=false",
				}, comp.flags...)}, nil
			},
			Ready: func(ctx context.Context, p []int) error {
				return supervisor.HTTPGet(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", p[0]), c.ca.CertPool(), "")
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) installCRDs(ctx context.Context) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	jobset, err := moduleDir("sigs.k8s.io/jobset")
	if err != nil {
		return err
	}
	kueue, err := moduleDir("sigs.k8s.io/kueue")
	if err != nil {
		return err
	}
	nad, err := moduleDir("github.com/k8snetworkplumbingwg/network-attachment-definition-client")
	if err != nil {
		return err
	}
	dirs := []string{
		filepath.Join(nad, "artifacts", "networks-crd.yaml"),
		filepath.Join(root, "kustomize", "crd", "trainer"),
		filepath.Join(root, "kustomize", "crd", "torus"),
		filepath.Join(jobset, "config", "components", "crd", "bases"),
		filepath.Join(kueue, "config", "components", "crd", "bases"),
	}
	if c.openshift {
		scc, err := sccCRD()
		if err != nil {
			return err
		}
		dirs = append(dirs, scc)
	}
	if c.realNode {
		// Whereabouts keeps the real nodes' secondary network addresses
		// in its IPPools.
		wa, err := moduleDir("github.com/k8snetworkplumbingwg/whereabouts", "whereabouts")
		if err != nil {
			return err
		}
		dirs = append(dirs, filepath.Join(wa, "doc", "crds", "whereabouts.cni.cncf.io_ippools.yaml"),
			filepath.Join(wa, "doc", "crds", "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml"))
	}
	crds, err := repo.ReadCRDs(dirs...)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(crds))
	for _, o := range crds {
		if err := c.apply(ctx, o); err != nil {
			return fmt.Errorf("applying CRD %s: %w", o.GetName(), err)
		}
		names = append(names, o.GetName())
	}
	return c.waitEstablished(ctx, names)
}

// Node shape of the simulated cluster: GPU nodes in racks of two, in one
// block, so topology-aware placement has somewhere to place.
const (
	nodeCPU    = "32"
	nodeMemory = "256Gi"
	nodeGPUs   = "8"
)

func (c *cluster) startKwok(ctx context.Context) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	kwok, err := moduleDir("sigs.k8s.io/kwok", "controllers")
	if err != nil {
		return err
	}
	stages := []string{
		filepath.Join(kwok, "kustomize", "stage", "node", "fast", "node-initialize.yaml"),
		filepath.Join(kwok, "kustomize", "stage", "node", "heartbeat", "node-heartbeat.yaml"),
		filepath.Join(kwok, "kustomize", "stage", "pod", "fast", "pod-ready.yaml"),
		filepath.Join(kwok, "kustomize", "stage", "pod", "fast", "pod-delete.yaml"),
	}
	ours, err := filepath.Glob(filepath.Join(root, "hack", "cluster", "kwok", "*.yaml"))
	if err != nil {
		return err
	}
	var config strings.Builder
	for _, f := range append(stages, ours...) {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		config.WriteString("---\n")
		config.Write(data)
		config.WriteString("\n")
	}
	configFile := filepath.Join(c.dir, "config", "kwok.yaml")
	if err := os.WriteFile(configFile, []byte(config.String()), 0o644); err != nil {
		return err
	}
	serving, err := c.servingCert("kwok")
	if err != nil {
		return err
	}
	for i := range c.nodes {
		if err := c.client.Create(ctx, kwokNode(i, c.realNode)); err != nil {
			return fmt.Errorf("creating node: %w", err)
		}
	}
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "kwok", Ports: 1,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			return supervisor.Spec{Argv: []string{
				c.bin("kwok"), "--kubeconfig=" + c.kubeconfig(), "--config=" + configFile,
				"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
				"--node-ip=127.0.0.1", "--node-port=" + strconv.Itoa(p[0]),
				"--server-address=127.0.0.1:" + strconv.Itoa(p[0]),
				"--tls-cert-file=" + filepath.Join(serving, "tls.crt"),
				"--tls-private-key-file=" + filepath.Join(serving, "tls.key"),
				"--cidr=10.244.0.0/16",
			}}, nil
		},
		Ready: c.nodesReady,
	})
	return err
}

// gpuTaint keeps the kwok nodes, which simulate GPU nodes, for pods that
// ask for GPUs when a real node runs beside them: everything else lands
// on the real node and really runs. The ExtendedResourceToleration
// admission plugin gives a pod that requests nvidia.com/gpu a toleration
// for a taint of that key; a many-node test that asks for no GPUs
// tolerates it itself. Without a real node, kwok nodes are the only ones
// and carry no taint.
var gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// kwokNode is a simulated GPU node; tainted when a real node runs too.
func kwokNode(i int, tainted bool) *corev1.Node {
	name := fmt.Sprintf("kwok-node-%d", i)
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(nodeCPU),
		corev1.ResourceMemory: resource.MustParse(nodeMemory),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      resource.MustParse(nodeGPUs),
		// RDMA devices as the SR-IOV network device plugin (InfiniBand VFs)
		// and NVIDIA's RDMA shared device plugin advertise them.
		"openshift.io/mlnxib":       resource.MustParse("8"),
		"rdma/hca_shared_devices_a": resource.MustParse("100"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":            name,
				"kubernetes.io/os":                  "linux",
				"type":                              "kwok",
				"cloud.provider.com/topology-block": "block-0",
				"cloud.provider.com/topology-rack":  fmt.Sprintf("rack-%d", i/2),
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if tainted {
		node.Spec.Taints = []corev1.Taint{gpuTaint}
	}
	return node
}

func (c *cluster) startJobSet(ctx context.Context) error {
	certs, err := c.servingCert("jobset-webhook")
	if err != nil {
		return err
	}
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "jobset", Ports: 2,
		Command: func(ctx context.Context, p []int) (supervisor.Spec, error) {
			cfg := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:%d
clientConnection:
  qps: 500
  burst: 500
`, p[0], certs, p[1])
			cfgFile := filepath.Join(c.dir, "config", "jobset.yaml")
			if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
				return supervisor.Spec{}, err
			}
			if err := c.installWebhooks(ctx, "jobset", p[0], "sigs.k8s.io/jobset", "config/components/webhook/manifests.yaml"); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{Argv: []string{c.bin("jobset-controller"), "--config=" + cfgFile},
				Env: []string{"KUBECONFIG=" + c.kubeconfig()}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			if err := c.httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p[1])); err != nil {
				return err
			}
			return c.jobSetAdmitted(ctx)
		},
	})
	return err
}

func (c *cluster) startKueue(ctx context.Context) error {
	certs, err := c.servingCert("kueue-webhook")
	if err != nil {
		return err
	}
	if err := c.ensureNamespace(ctx, "kueue-system"); err != nil {
		return err
	}
	// Kueue reads its metrics certificate from a fixed path,
	// /etc/kueue/metrics/certs. It gets one in a private mount namespace
	// over an overlay of /etc, so the machine's /etc stays untouched.
	overlay := filepath.Join(c.dir, "kueue-etc")
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "kueue", Ports: 3, Timeout: 90 * time.Second,
		Command: func(ctx context.Context, p []int) (supervisor.Spec, error) {
			cfg := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: 127.0.0.1:%d
health:
  healthProbeBindAddress: 127.0.0.1:%d
clientConnection:
  qps: 500
  burst: 500
waitForPodsReady:
  timeout: 5m
  blockAdmission: false
integrations:
  frameworks:
  - jobset.x-k8s.io/jobset
featureGates:
  VisibilityOnDemand: false
`, p[0], certs, p[1], p[2])
			cfgFile := filepath.Join(c.dir, "config", "kueue.yaml")
			if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
				return supervisor.Spec{}, err
			}
			if err := c.installWebhooks(ctx, "kueue", p[0], "sigs.k8s.io/kueue", "config/components/webhook/manifests.yaml"); err != nil {
				return supervisor.Spec{}, err
			}
			// A fresh overlay each attempt: a dead attempt's work
			// directory cannot be reused.
			if err := os.RemoveAll(overlay); err != nil {
				return supervisor.Spec{}, err
			}
			for _, d := range []string{"upper", "work"} {
				if err := os.MkdirAll(filepath.Join(overlay, d), 0o755); err != nil {
					return supervisor.Spec{}, err
				}
			}
			script := fmt.Sprintf(`set -e
mount -t overlay overlay -o lowerdir=/etc,upperdir=%[1]s/upper,workdir=%[1]s/work /etc
mkdir -p /etc/kueue/metrics/certs
cp %[2]s/tls.crt %[2]s/tls.key /etc/kueue/metrics/certs/
exec %[3]s --config=%[4]s
`, overlay, certs, c.bin("kueue"), cfgFile)
			argv := []string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script}
			if os.Geteuid() != 0 {
				argv = append([]string{"unshare", "--user", "--map-root-user"}, argv[1:]...)
			}
			return supervisor.Spec{Argv: argv, Env: []string{"KUBECONFIG=" + c.kubeconfig()}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			if err := c.httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p[2])); err != nil {
				return err
			}
			// Kueue's JobSet webhook now sits in the same path.
			return c.jobSetAdmitted(ctx)
		},
	})
	return err
}

func (c *cluster) startOperator(ctx context.Context) error {
	// Beside real nodes, the operator serves on the host's address on their
	// bridge, where the API server calls its webhooks and the training
	// pods report their progress (its status endpoint); else on loopback.
	host := loopback
	var ips []net.IP
	if c.realNode {
		host = hostIP
		ips = []net.IP{net.ParseIP(hostIP)}
	}
	certs := filepath.Join(c.ca.Dir, "torus-webhook")
	if err := c.ca.ServingCertFor(certs, "torus-webhook", ips); err != nil {
		return err
	}
	if err := c.ensureNamespace(ctx, "torus-system"); err != nil {
		return err
	}
	root, err := repo.Root()
	if err != nil {
		return err
	}
	webhooks := filepath.Join(root, "kustomize", "webhook", "manifests.yaml")
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "torus-operator", Ports: 3,
		Command: func(ctx context.Context, p []int) (supervisor.Spec, error) {
			if err := c.installWebhooksFile(ctx, "torus", host, p[0], webhooks); err != nil {
				return supervisor.Spec{}, err
			}
			argv := []string{
				c.operator,
				"--webhook-host=" + host, "--webhook-port=" + strconv.Itoa(p[0]), "--webhook-cert-dir=" + certs,
				// The pods reach the endpoint at the address the API
				// server does, and trust the local CA.
				"--status-server-url=https://" + net.JoinHostPort(host, strconv.Itoa(p[0])), "--status-server-ca-file=" + c.ca.CAFile,
				fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p[1]),
				fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", p[2]),
				"--leader-elect=true", "--leader-election-namespace=torus-system",
				// The local cluster shares its cores with the tests and
				// whatever else runs: an API server slowed past the default
				// 10 s renew deadline would stop the operator, which no
				// Deployment restarts here.
				"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s",
			}
			// The operator runs outside a pod: it is told its image, which
			// the real nodes hold (operatorImageArchive).
			if tag, err := csvImage(filepath.Join(root, "bundle", "manifests", "torus-operator.clusterserviceversion.yaml")); err == nil {
				argv = append(argv, "--launch-image="+tag)
			}
			if !c.realNode {
				// kwok runs no containers: no launcher can wait for its
				// workers there, and its simulated run must start after
				// theirs.
				argv = append(argv, "--launcher-after-workers")
			}
			return supervisor.Spec{Argv: argv, Env: []string{"KUBECONFIG=" + c.kubeconfig()}}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			if err := c.httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p[2])); err != nil {
				return err
			}
			if err := c.trainJobAdmitted(ctx); err != nil {
				return err
			}
			return c.operatorLeads(ctx)
		},
	})
	return err
}
