package mpi

import (
	"fmt"
	"maps"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// applyRuntimePatches applies the runtimePatches Kueue's TrainJob
// integration writes on admission (manager kueue.x-k8s.io/manager): pod
// labels, annotations, node selectors, tolerations and scheduling gates of
// the replicated jobs it names. Other managers' patches are not Torus's to
// interpret.
func applyRuntimePatches(js *jobsetv1alpha2.JobSet, tj *trainer.TrainJob) error {
	for _, p := range tj.Spec.RuntimePatches {
		if p.Manager != KueueManager || p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		tmpl := p.TrainingRuntimeSpec.Template
		if tmpl.Metadata != nil {
			js.Labels = mergeMaps(js.Labels, tmpl.Metadata.Labels)
			js.Annotations = mergeMaps(js.Annotations, tmpl.Metadata.Annotations)
		}
		if tmpl.Spec == nil {
			continue
		}
		for _, rp := range tmpl.Spec.ReplicatedJobs {
			rj := findReplicatedJob(js, rp.Name)
			if rj == nil {
				return fmt.Errorf("runtimePatches from %s name replicated job %q, which the runtime does not have", p.Manager, rp.Name)
			}
			if rp.Template == nil || rp.Template.Spec == nil || rp.Template.Spec.Template == nil {
				continue
			}
			pt := rp.Template.Spec.Template
			pod := &rj.Template.Spec.Template
			if pt.Metadata != nil {
				pod.Labels = mergeMaps(pod.Labels, pt.Metadata.Labels)
				pod.Annotations = mergeMaps(pod.Annotations, pt.Metadata.Annotations)
			}
			if ps := pt.Spec; ps != nil {
				pod.Spec.NodeSelector = mergeMaps(pod.Spec.NodeSelector, ps.NodeSelector)
				pod.Spec.Tolerations = appendMissing(pod.Spec.Tolerations, ps.Tolerations)
				pod.Spec.SchedulingGates = appendMissingGates(pod.Spec.SchedulingGates, ps.SchedulingGates)
			}
		}
	}
	return nil
}

func findReplicatedJob(js *jobsetv1alpha2.JobSet, name string) *jobsetv1alpha2.ReplicatedJob {
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == name {
			return &js.Spec.ReplicatedJobs[i]
		}
	}
	return nil
}

func mergeMaps(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

func appendMissing(dst, src []corev1.Toleration) []corev1.Toleration {
	for _, t := range src {
		found := false
		for _, d := range dst {
			found = found || d.MatchToleration(&t)
		}
		if !found {
			dst = append(dst, t)
		}
	}
	return dst
}

func appendMissingGates(dst, src []corev1.PodSchedulingGate) []corev1.PodSchedulingGate {
	for _, g := range src {
		found := false
		for _, d := range dst {
			found = found || d.Name == g.Name
		}
		if !found {
			dst = append(dst, g)
		}
	}
	return dst
}
