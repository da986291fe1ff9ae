package run

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// cloneJob copies a job's configuration for a rerun under a new name: its
// spec without what Kueue wrote when it admitted the job, and the labels
// and annotations its owner set. The origin is recorded in
// api.AnnotationRerunOf.
func cloneJob(orig *trainer.TrainJob, name string) *trainer.TrainJob {
	tj := mpi.NewTrainJob(name, orig.Namespace)
	tj.Labels = maps.Clone(orig.Labels)
	tj.Annotations = maps.Clone(orig.Annotations)
	delete(tj.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[api.AnnotationRerunOf] = orig.Name
	tj.Spec = *orig.Spec.DeepCopy()
	// Admission decisions belong to the old run; suspension too (Kueue
	// suspends and resumes queued jobs itself).
	var patches []trainer.RuntimePatch
	for _, p := range tj.Spec.RuntimePatches {
		if p.Manager != mpi.KueueManager {
			patches = append(patches, p)
		}
	}
	tj.Spec.RuntimePatches = patches
	tj.Spec.Suspend = nil
	return tj
}

var rerunSuffix = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// nextName picks a rerun's name: NAME-2, NAME-3, … skipping names taken. A
// rerun of a rerun (pi-2) counts on from its base (pi-3).
func nextName(orig *trainer.TrainJob, taken func(string) bool) string {
	base, n := orig.Name, 2
	if _, isRerun := orig.Annotations[api.AnnotationRerunOf]; isRerun {
		if m := rerunSuffix.FindStringSubmatch(orig.Name); m != nil {
			base = m[1]
			if k, err := strconv.Atoi(m[2]); err == nil {
				n = k + 1
			}
		}
	}
	for ; ; n++ {
		name := fmt.Sprintf("%s-%d", base, n)
		if !taken(name) {
			return name
		}
	}
}

// copiedRuntime reads the runtime a job's own runtime copy was made from
// (api.AnnotationRuntimeCopyOf), and the volumes the copy added to it.
func copiedRuntime(copyAnnotations map[string]string, spec *trainer.TrainingRuntimeSpec) (ref trainer.RuntimeRef, vols []Volume, ok bool) {
	from, found := copyAnnotations[api.AnnotationRuntimeCopyOf]
	if !found {
		return ref, nil, false
	}
	kind, name, cut := strings.Cut(from, "/")
	if !cut {
		return ref, nil, false
	}
	ref = trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(kind)}
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		if rj.Name != mpi.NodeJob {
			continue
		}
		ps := rj.Template.Spec.Template.Spec
		claims := map[string]*corev1.PersistentVolumeClaimVolumeSource{}
		for _, v := range ps.Volumes {
			if v.PersistentVolumeClaim != nil && strings.HasPrefix(v.Name, "pvc-") {
				claims[v.Name] = v.PersistentVolumeClaim
			}
		}
		for _, c := range ps.Containers {
			if c.Name != mpi.TrainerContainer {
				continue
			}
			for _, m := range c.VolumeMounts {
				if pvc, ok := claims[m.Name]; ok {
					vols = append(vols, Volume{Claim: pvc.ClaimName, MountPath: m.MountPath, ReadOnly: m.ReadOnly})
				}
			}
		}
	}
	return ref, vols, true
}
