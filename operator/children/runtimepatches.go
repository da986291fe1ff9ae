package children

import (
	"fmt"
	"maps"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
)

// applyRuntimePatches applies a TrainJob's runtimePatches, of any manager
// (Kueue's TrainJob integration writes them on admission), in order: the
// JobSet's, the Jobs' and the pods' labels and annotations, and the pods'
// node selectors, tolerations and scheduling gates, in the replicated jobs
// they name. The webhook refuses patches of anything else for MPI jobs.
func applyRuntimePatches(js *jobsetv1alpha2.JobSet, tj *trainer.TrainJob) error {
	for _, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		tmpl := p.TrainingRuntimeSpec.Template
		if tmpl.Metadata != nil {
			js.Labels = mergeMetadata(js.Labels, tmpl.Metadata.Labels)
			js.Annotations = mergeMetadata(js.Annotations, tmpl.Metadata.Annotations)
		}
		if tmpl.Spec == nil {
			continue
		}
		for _, rp := range tmpl.Spec.ReplicatedJobs {
			rj := findReplicatedJob(js, rp.Name)
			if rj == nil {
				return fmt.Errorf("runtimePatches from %s name replicated job %q, which the runtime does not have", p.Manager, rp.Name)
			}
			if rp.Template == nil {
				continue
			}
			if m := rp.Template.Metadata; m != nil {
				rj.Template.Labels = mergeMetadata(rj.Template.Labels, m.Labels)
				rj.Template.Annotations = mergeMetadata(rj.Template.Annotations, m.Annotations)
			}
			if rp.Template.Spec == nil || rp.Template.Spec.Template == nil {
				continue
			}
			pt := rp.Template.Spec.Template
			pod := &rj.Template.Spec.Template
			if pt.Metadata != nil {
				pod.Labels = mergeMetadata(pod.Labels, pt.Metadata.Labels)
				pod.Annotations = mergeMetadata(pod.Annotations, pt.Metadata.Annotations)
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

// mergeMetadata merges a patch's labels or annotations, except Torus's
// own: a patch (anyone who may update the TrainJob can write one) must not
// move pods into another job's selection, NetworkPolicy or status. The
// webhook refuses such patches; this holds when it was bypassed.
func mergeMetadata(dst, src map[string]string) map[string]string {
	for k, v := range src {
		if strings.HasPrefix(k, api.Domain) {
			continue
		}
		if dst == nil {
			dst = map[string]string{}
		}
		dst[k] = v
	}
	return dst
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
