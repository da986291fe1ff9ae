package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
	"github.com/torus-mpi/torus/test/localcluster/upstreamtrainer"
)

// upstreamTrainer is the component name of upstream Trainer's controller.
const upstreamTrainer = "trainer-controller-manager"

// startUpstreamTrainer runs upstream Trainer's controller (built by
// hack/testbin/build.sh trainer) in the operator's place, with its
// admission webhooks registered as upstream's manifests declare them, so
// that a job measured on this cluster pays what it pays on a cluster
// where upstream is installed. Its certificate management is off: it
// reads the local CA's serving certificate where controller-runtime
// looks by default, under a private TMPDIR.
func (c *cluster) startUpstreamTrainer(ctx context.Context) error {
	if _, err := os.Stat(c.bin(upstreamTrainer)); err != nil {
		return fmt.Errorf("%s is missing: run hack/testbin/build.sh trainer", c.bin(upstreamTrainer))
	}
	root, err := repo.Root()
	if err != nil {
		return err
	}
	dir, err := repo.ModuleDir(upstreamtrainer.Module, filepath.Join(root, "hack", "testbin", "controllers"))
	if err != nil {
		return err
	}
	tmp := filepath.Join(c.dir, "upstream-tmp")
	if err := c.ca.ServingCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs"), "trainer-webhook"); err != nil {
		return err
	}
	_, _, err = c.run(ctx, supervisor.Component{
		// Health, metrics, webhook; the status server (only with the
		// TrainJobStatus feature) may leave its port unbound.
		Name: upstreamTrainer, Ports: 4, Optional: 1,
		Command: func(ctx context.Context, p []int) (supervisor.Spec, error) {
			cfg := filepath.Join(c.dir, "config", "upstream-trainer.yaml")
			if err := upstreamtrainer.WriteConfig(upstreamtrainer.ShippedConfig(dir), cfg, upstreamtrainer.Options{
				HealthPort: p[0], MetricsPort: p[1], WebhookPort: p[2], StatusServerPort: p[3],
			}); err != nil {
				return supervisor.Spec{}, err
			}
			if err := c.installWebhooksFile(ctx, "upstream-trainer", loopback, p[2], filepath.Join(dir, "manifests", "base", "webhook", "manifests.yaml")); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{Argv: []string{c.bin(upstreamTrainer), "--config=" + cfg},
				Env: []string{"KUBECONFIG=" + c.kubeconfig(), "TMPDIR=" + tmp}}, nil
		},
		// Upstream is ready once its webhook server listens.
		Ready: func(ctx context.Context, p []int) error {
			return c.httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p[0]))
		},
	})
	return err
}
