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

// sandboxLookups bounds the pods whose events one read covers: one pod's
// cause explains the others', and a large job's pods all waiting must not
// cost a request each. A job reads them at most once per sandboxRecheck:
// each of its pods' updates brings it back, and a 256-worker job on a busy
// cluster would otherwise read them on hundreds of reconciles.
const sandboxLookups = 3

// sandboxFailures explains the job's pods that have waited for their
// sandbox past a moment, from the kubelet's FailedCreatePodSandBox events
// (read from the API server: the cache keeps only the Job controller's
// events). Most often their network: a CNI plugin that failed.
func (r *TrainJobReconciler) sandboxFailures(ctx context.Context, s *scope) ([]diagnosis.Finding, error) {
	if s.job == nil {
		return nil, nil
	}
	key := client.ObjectKeyFromObject(s.tj)
	var waiting []*corev1.Pod
	for i := range s.pods {
		if p := &s.pods[i]; diagnosis.AwaitsSandbox(p, s.now) {
			waiting = append(waiting, p)
		}
	}
	if len(waiting) == 0 {
		r.memory.sandboxes.read(key, nil)
		return nil, nil
	}
	s.lookAgain(sandboxRecheck)
	if last := r.memory.sandboxes.last(key, s.now, sandboxRecheck); last != nil {
		return last.findings, nil
	}
	findings, err := r.readSandboxEvents(ctx, s, waiting[:min(len(waiting), sandboxLookups)])
	if err != nil {
		return nil, err
	}
	r.memory.sandboxes.read(key, &sandboxRead{at: s.now, findings: findings})
	return findings, nil
}

// readSandboxEvents explains the first of pods the kubelet's events explain.
func (r *TrainJobReconciler) readSandboxEvents(ctx context.Context, s *scope, pods []*corev1.Pod) ([]diagnosis.Finding, error) {
	for _, p := range pods {
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
