package run

import (
	"slices"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// patchManager names the runtime patch run writes: Trainer keys patches by
// manager, a domain-prefixed path.
const patchManager = api.Domain + fieldManager

// applyPodPatch writes the spec's volumes, image pull secrets and service
// account into the job's runtime patch, for the launcher's and the workers'
// pods: volumes and secrets by name over those of an earlier run (rerun),
// the service account in place of one. Upstream Trainer applies such a
// patch to any runtime, so the job runs on its runtime as it is.
func (s Spec) applyPodPatch(tj *trainer.TrainJob) {
	if len(s.Volumes) == 0 && len(s.ImagePullSecrets) == 0 && s.ServiceAccount == "" {
		return
	}
	p := runPatch(tj, true)
	for _, job := range []string{mpi.LauncherJob, mpi.NodeJob} {
		ps := podPatch(p, job)
		for _, v := range s.Volumes {
			ps.Volumes = mpi.UpsertVolume(ps.Volumes, corev1.Volume{
				Name: v.Name(),
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: v.Claim, ReadOnly: v.ReadOnly,
				}},
			})
			c := containerPatch(ps, mpi.TrainerContainer)
			c.VolumeMounts = mpi.UpsertMount(c.VolumeMounts, corev1.VolumeMount{Name: v.Name(), MountPath: v.MountPath, ReadOnly: v.ReadOnly})
		}
		for _, name := range s.ImagePullSecrets {
			if !slices.ContainsFunc(ps.ImagePullSecrets, func(r corev1.LocalObjectReference) bool { return r.Name == name }) {
				ps.ImagePullSecrets = append(ps.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
			}
		}
		if s.ServiceAccount != "" {
			ps.ServiceAccountName = ptr.To(s.ServiceAccount)
		}
	}
}

// runPatch is the job's runtime patch of patchManager; with add, one is
// made when it has none.
func runPatch(tj *trainer.TrainJob, add bool) *trainer.JobSetSpecPatch {
	for i := range tj.Spec.RuntimePatches {
		p := &tj.Spec.RuntimePatches[i]
		if p.Manager != patchManager || p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		if p.TrainingRuntimeSpec.Template.Spec == nil {
			p.TrainingRuntimeSpec.Template.Spec = &trainer.JobSetSpecPatch{}
		}
		return p.TrainingRuntimeSpec.Template.Spec
	}
	if !add {
		return nil
	}
	spec := &trainer.JobSetSpecPatch{}
	tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, trainer.RuntimePatch{Manager: patchManager,
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: spec}}})
	return spec
}

// podPatch is a patch's pod spec of a replicated job, made when missing.
func podPatch(p *trainer.JobSetSpecPatch, job string) *trainer.PodSpecPatch {
	i := slices.IndexFunc(p.ReplicatedJobs, func(rj trainer.ReplicatedJobPatch) bool { return rj.Name == job })
	if i < 0 {
		p.ReplicatedJobs = append(p.ReplicatedJobs, trainer.ReplicatedJobPatch{Name: job})
		i = len(p.ReplicatedJobs) - 1
	}
	rj := &p.ReplicatedJobs[i]
	if rj.Template == nil {
		rj.Template = &trainer.JobTemplatePatch{}
	}
	if rj.Template.Spec == nil {
		rj.Template.Spec = &trainer.JobSpecPatch{}
	}
	if rj.Template.Spec.Template == nil {
		rj.Template.Spec.Template = &trainer.PodTemplatePatch{}
	}
	if rj.Template.Spec.Template.Spec == nil {
		rj.Template.Spec.Template.Spec = &trainer.PodSpecPatch{}
	}
	return rj.Template.Spec.Template.Spec
}

// containerPatch is a pod patch's patch of a container, made when missing.
func containerPatch(ps *trainer.PodSpecPatch, name string) *trainer.ContainerPatch {
	i := slices.IndexFunc(ps.Containers, func(c trainer.ContainerPatch) bool { return c.Name == name })
	if i < 0 {
		ps.Containers = append(ps.Containers, trainer.ContainerPatch{Name: name})
		i = len(ps.Containers) - 1
	}
	return &ps.Containers[i]
}

// patched is what a job's runtime patch of patchManager gives the
// launcher's pods, as run's flags take it: the claims mounted into the MPI
// container, the image pull secrets, the service account.
func patched(tj *trainer.TrainJob) (vols []Volume, pullSecrets []string, serviceAccount string) {
	p := runPatch(tj, false)
	if p == nil {
		return nil, nil, ""
	}
	i := slices.IndexFunc(p.ReplicatedJobs, func(rj trainer.ReplicatedJobPatch) bool { return rj.Name == mpi.LauncherJob })
	if i < 0 {
		return nil, nil, ""
	}
	rj := p.ReplicatedJobs[i]
	if rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil || rj.Template.Spec.Template.Spec == nil {
		return nil, nil, ""
	}
	ps := rj.Template.Spec.Template.Spec
	for _, c := range ps.Containers {
		if c.Name != mpi.TrainerContainer {
			continue
		}
		for _, m := range c.VolumeMounts {
			for _, v := range ps.Volumes {
				if v.Name == m.Name && v.PersistentVolumeClaim != nil {
					vols = append(vols, Volume{Claim: v.PersistentVolumeClaim.ClaimName, MountPath: m.MountPath, ReadOnly: m.ReadOnly})
				}
			}
		}
	}
	for _, r := range ps.ImagePullSecrets {
		pullSecrets = append(pullSecrets, r.Name)
	}
	return vols, pullSecrets, ptr.Deref(ps.ServiceAccountName, "")
}

// patchedVolumes are the claims a job's runtime patch mounts.
func patchedVolumes(tj *trainer.TrainJob) []Volume {
	vols, _, _ := patched(tj)
	return vols
}
