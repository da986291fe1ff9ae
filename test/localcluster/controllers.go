// The controllers of the cluster's workloads: JobSet, Kueue and the Torus
// operator.

package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

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

// kueueConfig is Kueue's configuration on the local cluster: its webhook,
// metrics and health on loopback ports, no leader election, the JobSet
// integration, and with mpiJob the MPIJob one, which Kueue sets up once the
// MPIJob CRD is served; a job whose pods do not all run within podsReady
// is evicted to start again.
// kueueManagerConfig is the configuration Kueue's manifests install it
// with, in its module.
const kueueManagerConfig = "config/components/manager/controller_manager_config.yaml"

// kueueConcurrency reads how many objects of each kind Kueue's manifests
// have it reconcile at once: left out, each of its controllers would take
// one at a time, and a burst of jobs would wait on a Kueue slower than the
// one users install.
func kueueConcurrency() (map[string]int, error) {
	dir, err := moduleDir("sigs.k8s.io/kueue")
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, kueueManagerConfig))
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Controller struct {
			GroupKindConcurrency map[string]int `json:"groupKindConcurrency"`
		} `json:"controller"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("reading Kueue's %s: %w", kueueManagerConfig, err)
	}
	if len(cfg.Controller.GroupKindConcurrency) == 0 {
		return nil, fmt.Errorf("no controller.groupKindConcurrency in Kueue's %s", kueueManagerConfig)
	}
	return cfg.Controller.GroupKindConcurrency, nil
}

// concurrencyFlag is -kueue-concurrency: KIND=N pairs, comma-separated.
type concurrencyFlag map[string]int

func (f *concurrencyFlag) String() string {
	if f == nil || len(*f) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*f)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, (*f)[k]))
	}
	return strings.Join(parts, ",")
}

func (f *concurrencyFlag) Set(v string) error {
	if *f == nil {
		*f = concurrencyFlag{}
	}
	for _, pair := range strings.Split(v, ",") {
		kind, n, ok := strings.Cut(strings.TrimSpace(pair), "=")
		count, err := strconv.Atoi(n)
		if !ok || kind == "" || err != nil || count < 1 {
			return fmt.Errorf("%q: give KIND=N with N at least 1, such as JobSet.jobset.x-k8s.io=5", pair)
		}
		(*f)[kind] = count
	}
	return nil
}

func kueueConfig(webhookPort, metricsPort, healthPort int, certDir string, mpiJob bool, podsReady time.Duration, concurrency map[string]int) string {
	frameworks := "  - jobset.x-k8s.io/jobset\n"
	if mpiJob {
		frameworks += "  - kubeflow.org/mpijob\n"
	}
	kinds := slices.Sorted(maps.Keys(concurrency))
	var controller strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&controller, "    %s: %d\n", k, concurrency[k])
	}
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
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
controller:
  groupKindConcurrency:
%swaitForPodsReady:
  timeout: %s
  blockAdmission: false
integrations:
  frameworks:
%sfeatureGates:
  VisibilityOnDemand: false
`, webhookPort, certDir, metricsPort, healthPort, controller.String(), podsReady, frameworks)
}

func (c *cluster) startKueue(ctx context.Context) error {
	certs, err := c.servingCert("kueue-webhook")
	if err != nil {
		return err
	}
	if err := c.ensureNamespace(ctx, "kueue-system"); err != nil {
		return err
	}
	concurrency, err := kueueConcurrency()
	if err != nil {
		return err
	}
	maps.Copy(concurrency, c.kueueConcurrency)
	// Kueue reads its metrics certificate from a fixed path,
	// /etc/kueue/metrics/certs. It gets one in a private mount namespace
	// over an overlay of /etc, so the machine's /etc stays untouched.
	overlay := filepath.Join(c.dir, "kueue-etc")
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "kueue", Ports: 3, Timeout: 90 * time.Second,
		Command: func(ctx context.Context, p []int) (supervisor.Spec, error) {
			cfg := kueueConfig(p[0], p[1], p[2], certs, c.kueueMPIJob, c.podsReadyTimeout, concurrency)
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
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "torus-operator", Ports: 4,
		Command: func(ctx context.Context, p []int) (supervisor.Spec, error) {
			if err := c.installTorusWebhooks(ctx, host, p[0]); err != nil {
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
				// For finding where a benchmark's time goes.
				fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", p[3]),
				"--leader-elect=true", "--leader-election-namespace=torus-system",
				// The local cluster shares its cores with the tests and
				// whatever else runs: an API server slowed past the renew
				// deadline stops the operator, which no Deployment restarts
				// here. Two test tiers, a 256-pod deletion and a build on 2
				// cores starve it for more than 20 s. Its one replica has
				// nobody to hand over to; only an operator started after
				// one was killed waits out the lease.
				"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s", "--leader-elect-retry-period=5s",
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
