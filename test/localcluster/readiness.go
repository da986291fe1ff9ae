package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/operatorstatus"
)

// Readiness checks beyond a component's health endpoint: what a user
// needs of it works through the API server.

// nodesReady: every kwok node reports Ready.
func (c *cluster) nodesReady(ctx context.Context, _ []int) error {
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes.Items {
		if n.Annotations["kwok.x-k8s.io/node"] != "fake" {
			continue // the real node
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready < c.nodes {
		return fmt.Errorf("%d of %d nodes ready", ready, c.nodes)
	}
	return nil
}

// jobSetAdmitted sends a JobSet through the API server in a dry run: the
// JobSet controller's webhooks (and Kueue's, once registered) must answer.
func (c *cluster) jobSetAdmitted(ctx context.Context) error {
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "torus-cluster-readiness", Namespace: metav1.NamespaceDefault},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name: "probe", Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "probe", Image: "probe"}},
			}}}},
		}}},
	}
	if err := c.client.Create(ctx, js, client.DryRunAll); err != nil {
		return fmt.Errorf("a dry-run JobSet was not admitted: %w", err)
	}
	return nil
}

// trainJobAdmitted sends a TrainJob for a runtime that does not exist
// through the API server in a dry run: Torus's validating webhook must
// refuse it in its own words (the API server reaching the webhook).
func (c *cluster) trainJobAdmitted(ctx context.Context) error {
	probe := mpi.NewTrainJob("torus-cluster-readiness", metav1.NamespaceDefault)
	probe.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torus-cluster-no-such-runtime",
		APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	err := c.client.Create(ctx, probe, client.DryRunAll)
	switch {
	case err == nil:
		return errors.New("a dry-run TrainJob for a missing runtime was accepted: Torus's webhook is not registered")
	case strings.Contains(err.Error(), "torus-cluster-no-such-runtime") && !strings.Contains(err.Error(), "failed calling webhook"):
		return nil
	}
	return fmt.Errorf("Torus's webhook did not answer a dry-run TrainJob: %w", err)
}

// operatorLeads: the operator holds its leader lease, so it reconciles;
// read the way kubectl mpi reads it.
func (c *cluster) operatorLeads(ctx context.Context) error {
	if st := operatorstatus.Check(ctx, c.client, time.Now()); !st.Running {
		return errors.New(st.Message())
	}
	return nil
}
