package trainerstatus

import (
	"slices"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// ApplyTemplate wires a pod template given as an apply configuration, as
// upstream's framework builds the JobSets of the TrainJobs that are not
// MPI, the way Apply wires a pod template: the projected token for the
// job's audience and the CA in one read-only volume, and the environment
// on every container. A variable, volume or mount the template sets itself
// is kept.
func (s *Server) ApplyTemplate(pt *corev1ac.PodTemplateSpecApplyConfiguration, namespace, name string) {
	pt.WithAnnotations(map[string]string{AnnotationCA: s.CA})
	if pt.Spec == nil {
		pt.WithSpec(corev1ac.PodSpec())
	}
	spec := pt.Spec
	if !slices.ContainsFunc(spec.Volumes, func(v corev1ac.VolumeApplyConfiguration) bool { return v.Name != nil && *v.Name == Volume }) {
		spec.WithVolumes(corev1ac.Volume().WithName(Volume).WithProjected(corev1ac.ProjectedVolumeSource().
			WithDefaultMode(0o444).
			WithSources(
				corev1ac.VolumeProjection().WithServiceAccountToken(corev1ac.ServiceAccountTokenProjection().
					WithAudience(Audience(namespace, name)).WithExpirationSeconds(TokenExpirationSeconds).WithPath(TokenFile)),
				corev1ac.VolumeProjection().WithDownwardAPI(corev1ac.DownwardAPIProjection().WithItems(
					corev1ac.DownwardAPIVolumeFile().WithPath(CAFile).
						WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("metadata.annotations['"+AnnotationCA+"']")))),
			)))
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1ac.VolumeMountApplyConfiguration) bool { return m.Name != nil && *m.Name == Volume }) {
			c.WithVolumeMounts(corev1ac.VolumeMount().WithName(Volume).WithMountPath(MountPath).WithReadOnly(true))
		}
		for _, e := range s.Env(namespace, name) {
			if !slices.ContainsFunc(c.Env, func(v corev1ac.EnvVarApplyConfiguration) bool { return v.Name != nil && *v.Name == e.Name }) {
				c.WithEnv(corev1ac.EnvVar().WithName(e.Name).WithValue(e.Value))
			}
		}
	}
}
