package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/diagnosis"
)

// sandboxRecheck is how often a job with a pod waiting for its sandbox
// looks again: the kubelet's retries change nothing the job watches.
const sandboxRecheck = 10 * time.Second

// sandboxLookups bounds the pods whose events one reconcile reads: one
// pod's cause explains the others', and a large job's pods all waiting
// must not cost a request each.
const sandboxLookups = 3

// sandboxFailures explains the job's pods that have waited for their
// sandbox past a moment, from the kubelet's FailedCreatePodSandBox events
// (read from the API server: the cache keeps only the Job controller's
// events). Most often their network: a CNI plugin that failed.
func (r *TrainJobReconciler) sandboxFailures(ctx context.Context, s *scope) ([]diagnosis.Finding, error) {
	if s.job == nil {
		return nil, nil
	}
	lookups := 0
	for i := range s.pods {
		p := &s.pods[i]
		if !diagnosis.AwaitsSandbox(p, s.now) {
			continue
		}
		s.recheck = minPositive(s.recheck, sandboxRecheck)
		if lookups == sandboxLookups {
			break
		}
		lookups++
		var events corev1.EventList
		if err := r.apiReader.List(ctx, &events, client.InNamespace(p.Namespace), client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{
			"involvedObject.uid": string(p.UID), "reason": diagnosis.ReasonFailedCreatePodSandBox,
		})}); err != nil {
			return nil, fmt.Errorf("reading the events of pod %s: %w", p.Name, err)
		}
		if f, ok := diagnosis.Sandbox(p, s.job.Placement(), events.Items, s.job.Network != nil); ok {
			return []diagnosis.Finding{f}, nil
		}
	}
	return nil, nil
}
