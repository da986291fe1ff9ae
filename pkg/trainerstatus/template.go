package trainerstatus

import (
	"encoding/json"
	"slices"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// ApplyTemplate wires a pod template given as an apply configuration, as
// upstream's framework builds the JobSets of the TrainJobs that are not
// MPI, exactly as Apply wires a pod template: the same volume, mount and
// variables, on every container. A variable, volume or mount the template
// sets itself is kept.
func (s *Server) ApplyTemplate(pt *corev1ac.PodTemplateSpecApplyConfiguration, namespace, name string) {
	pt.WithAnnotations(map[string]string{AnnotationCA: s.CA})
	if pt.Spec == nil {
		pt.WithSpec(corev1ac.PodSpec())
	}
	spec := pt.Spec
	if !slices.ContainsFunc(spec.Volumes, func(v corev1ac.VolumeApplyConfiguration) bool { return v.Name != nil && *v.Name == Volume }) {
		spec.WithVolumes(asApply[corev1ac.VolumeApplyConfiguration](volume(namespace, name)))
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1ac.VolumeMountApplyConfiguration) bool { return m.Name != nil && *m.Name == Volume }) {
			c.WithVolumeMounts(asApply[corev1ac.VolumeMountApplyConfiguration](mount))
		}
		for _, e := range s.Env(namespace, name) {
			if !slices.ContainsFunc(c.Env, func(v corev1ac.EnvVarApplyConfiguration) bool { return v.Name != nil && *v.Name == e.Name }) {
				c.WithEnv(corev1ac.EnvVar().WithName(e.Name).WithValue(e.Value))
			}
		}
	}
}

// asApply is a typed object as its apply configuration: both have the same
// JSON form, so one definition serves Apply and ApplyTemplate.
func asApply[A any](typed any) *A {
	data, err := json.Marshal(typed)
	if err != nil {
		panic(err) // a typed API object always marshals
	}
	var out A
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err) // the same fields, by construction
	}
	return &out
}
