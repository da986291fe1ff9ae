// The control plane: etcd, kube-apiserver with its audit policy,
// kube-controller-manager and kube-scheduler, and the CRDs it serves.

package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/test/localcluster/controlplane"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
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
			switch {
			case c.metricsServer:
				proxy, err := c.frontProxyFlags()
				if err != nil {
					return supervisor.Spec{}, err
				}
				flags = append(flags, proxy...)
			case c.realNode:
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
