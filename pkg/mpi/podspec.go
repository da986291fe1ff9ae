package mpi

import corev1 "k8s.io/api/core/v1"

// UpsertEnv sets variables by name, replacing earlier values in place.
func UpsertEnv(env []corev1.EnvVar, add ...corev1.EnvVar) []corev1.EnvVar {
	return upsert(env, func(e corev1.EnvVar) string { return e.Name }, add)
}

// UpsertVolume sets pod volumes by name, replacing earlier ones in place.
func UpsertVolume(vols []corev1.Volume, add ...corev1.Volume) []corev1.Volume {
	return upsert(vols, func(v corev1.Volume) string { return v.Name }, add)
}

// UpsertMount sets a container's mount of a volume, replacing an earlier
// mount of the same volume in place.
func UpsertMount(mounts []corev1.VolumeMount, m corev1.VolumeMount) []corev1.VolumeMount {
	return upsert(mounts, func(m corev1.VolumeMount) string { return m.Name }, []corev1.VolumeMount{m})
}

func upsert[T any](items []T, name func(T) string, add []T) []T {
	for _, a := range add {
		found := false
		for i := range items {
			if name(items[i]) == name(a) {
				items[i] = a
				found = true
				break
			}
		}
		if !found {
			items = append(items, a)
		}
	}
	return items
}
