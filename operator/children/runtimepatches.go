package children

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// patchTemplate applies a TrainJob's runtimePatches, of every manager (Kueue's
// TrainJob integration writes one on admission), in order, to its runtime's
// JobSet spec, as upstream Trainer applies them: each patch's spec is a
// strategic merge patch of the JobSet spec, so replicated jobs, containers,
// volumes, image pull secrets, env and scheduling gates merge by name,
// volume mounts by mount path, maps key by key, and tolerations replace the
// runtime's. The runtime's order of replicated jobs is kept, and of each
// pod's containers and init containers, which a merge puts in the patch's
// order: init containers run in that order, and kubectl logs and exec take
// the first container unless told.
//
// The patched template is what BuildJobSet then configures: the job's own
// image, command, environment, SSH volumes, mounts and init container are set
// over it, as upstream's plugins set theirs over upstream's patched template.
// What would make a job another's or break its keys is left out of each
// patch (the webhook refuses it; this holds where it was bypassed).
func patchTemplate(spec *jobsetv1alpha2.JobSetSpec, patches []trainer.RuntimePatch) (*jobsetv1alpha2.JobSetSpec, error) {
	order := map[string]int{}
	containers := map[string][2][]string{}
	for i, rj := range spec.ReplicatedJobs {
		order[rj.Name] = i
		ps := &rj.Template.Spec.Template.Spec
		containers[rj.Name] = [2][]string{containerNames(ps.Containers), containerNames(ps.InitContainers)}
	}
	for _, p := range patches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		// Targets are checked against the runtime's template: a strategic
		// merge would otherwise add a replicated job or a container made of
		// the patch alone, with no image.
		if err := checkPatchTargets(spec, p); err != nil {
			return nil, err
		}
		source, err := json.Marshal(spec)
		if err != nil {
			return nil, fmt.Errorf("encoding the JobSet template: %w", err)
		}
		patch, err := json.Marshal(withoutTorusParts(p.TrainingRuntimeSpec.Template.Spec))
		if err != nil {
			return nil, fmt.Errorf("encoding the runtime patch of %s: %w", p.Manager, err)
		}
		merged, err := strategicpatch.StrategicMergePatch(source, patch, jobsetv1alpha2.JobSetSpec{})
		if err != nil {
			return nil, fmt.Errorf("applying the runtime patch of %s: %w", p.Manager, err)
		}
		var out jobsetv1alpha2.JobSetSpec
		if err := json.Unmarshal(merged, &out); err != nil {
			return nil, fmt.Errorf("decoding the JobSet template patched by %s: %w", p.Manager, err)
		}
		spec = &out
	}
	slices.SortStableFunc(spec.ReplicatedJobs, func(a, b jobsetv1alpha2.ReplicatedJob) int {
		return order[a.Name] - order[b.Name]
	})
	for i := range spec.ReplicatedJobs {
		ps := &spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		names := containers[spec.ReplicatedJobs[i].Name]
		inOrder(ps.Containers, names[0])
		inOrder(ps.InitContainers, names[1])
	}
	return spec, nil
}

func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

// inOrder sorts containers into the order of names.
func inOrder(cs []corev1.Container, names []string) {
	slices.SortStableFunc(cs, func(a, b corev1.Container) int {
		return slices.Index(names, a.Name) - slices.Index(names, b.Name)
	})
}

// checkPatchTargets: a patch names replicated jobs and containers its
// runtime's template has.
func checkPatchTargets(spec *jobsetv1alpha2.JobSetSpec, p trainer.RuntimePatch) error {
	for _, rp := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
		i := slices.IndexFunc(spec.ReplicatedJobs, func(rj jobsetv1alpha2.ReplicatedJob) bool { return rj.Name == rp.Name })
		if i < 0 {
			return fmt.Errorf("runtimePatches from %s name replicated job %q, which the runtime does not have", p.Manager, rp.Name)
		}
		ps := podSpecPatch(rp)
		if ps == nil {
			continue
		}
		pod := &spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for _, c := range ps.Containers {
			if !hasContainer(pod.Containers, c.Name) {
				return fmt.Errorf("runtimePatches from %s name container %q, which replicated job %q of the runtime does not have", p.Manager, c.Name, rp.Name)
			}
		}
		for _, c := range ps.InitContainers {
			if !hasContainer(pod.InitContainers, c.Name) && !mpi.IsTorusInitContainer(c.Name) {
				return fmt.Errorf("runtimePatches from %s name init container %q, which replicated job %q of the runtime does not have", p.Manager, c.Name, rp.Name)
			}
		}
	}
	return nil
}

func podSpecPatch(rp trainer.ReplicatedJobPatch) *trainer.PodSpecPatch {
	if rp.Template == nil || rp.Template.Spec == nil || rp.Template.Spec.Template == nil {
		return nil
	}
	return rp.Template.Spec.Template.Spec
}

func hasContainer(cs []corev1.Container, name string) bool {
	return slices.ContainsFunc(cs, func(c corev1.Container) bool { return c.Name == name })
}

// withoutTorusParts copies a patch without what is Torus's: labels and
// annotations under its domain (they say which job a pod belongs to), its
// scheduling gate (pods wait behind it for their keys), the volumes it
// names for the keys and hostfile and any mount of them, and its init
// container.
func withoutTorusParts(spec *trainer.JobSetSpecPatch) *trainer.JobSetSpecPatch {
	spec = spec.DeepCopy()
	for i := range spec.ReplicatedJobs {
		rp := &spec.ReplicatedJobs[i]
		if rp.Template == nil {
			continue
		}
		withoutTorusMetadata(rp.Template.Metadata)
		if rp.Template.Spec == nil || rp.Template.Spec.Template == nil {
			continue
		}
		withoutTorusMetadata(rp.Template.Spec.Template.Metadata)
		ps := rp.Template.Spec.Template.Spec
		if ps == nil {
			continue
		}
		ps.Volumes = slices.DeleteFunc(ps.Volumes, func(v corev1.Volume) bool { return mpi.IsTorusVolume(v.Name) })
		ps.SchedulingGates = slices.DeleteFunc(ps.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return strings.HasPrefix(g.Name, api.Domain) })
		ps.InitContainers = slices.DeleteFunc(ps.InitContainers, func(c trainer.ContainerPatch) bool { return mpi.IsTorusInitContainer(c.Name) })
		for _, cs := range [][]trainer.ContainerPatch{ps.Containers, ps.InitContainers} {
			for c := range cs {
				cs[c].VolumeMounts = slices.DeleteFunc(cs[c].VolumeMounts, func(m corev1.VolumeMount) bool { return mpi.IsTorusVolume(m.Name) })
			}
		}
	}
	return spec
}

func withoutTorusMetadata(m *metav1.ObjectMeta) {
	if m == nil {
		return
	}
	for _, kv := range []map[string]string{m.Labels, m.Annotations} {
		for k := range kv {
			if strings.HasPrefix(k, api.Domain) {
				delete(kv, k)
			}
		}
	}
}

// patchMetadata merges the JobSet labels and annotations of a TrainJob's
// runtimePatches, in order, except Torus's own: a patch (anyone who may
// update the TrainJob can write one) must not move the job's JobSet into
// another job's selection or status.
func patchMetadata(js *jobsetv1alpha2.JobSet, patches []trainer.RuntimePatch) {
	for _, p := range patches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Metadata == nil {
			continue
		}
		m := p.TrainingRuntimeSpec.Template.Metadata
		js.Labels = mergeMetadata(js.Labels, m.Labels)
		js.Annotations = mergeMetadata(js.Annotations, m.Annotations)
	}
}

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
