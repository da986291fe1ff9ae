package render

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// RestrictedViolations lists how a pod spec breaks the restricted Pod
// Security Standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
// or OpenShift's restricted-v2 SCC. It is a static reading of both policies
// for the one pod Torus ships, so a test can refuse a regression before any
// cluster sees it; the OLM suite (test/olm) then has the API server's own
// PodSecurity admission enforce "restricted" on the installed Deployment.
func RestrictedViolations(spec *corev1.PodSpec) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		bad("host namespaces are not allowed")
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	// restricted-v2 assigns the UID, GID and fsGroup from the namespace's
	// range; any fixed value outside it is refused, so set none.
	if psc.RunAsUser != nil || psc.RunAsGroup != nil || psc.FSGroup != nil || len(psc.SupplementalGroups) > 0 {
		bad("pod securityContext fixes a UID or GID; OpenShift's restricted-v2 SCC assigns them")
	}
	if psc.SELinuxOptions != nil {
		bad("pod securityContext sets SELinux options")
	}
	podSeccomp := psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	podNonRoot := psc.RunAsNonRoot != nil && *psc.RunAsNonRoot

	for _, vol := range spec.Volumes {
		// The volume types both policies admit.
		ok := vol.ConfigMap != nil || vol.Secret != nil || vol.EmptyDir != nil || vol.Projected != nil ||
			vol.DownwardAPI != nil || vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil || vol.CSI != nil
		if !ok {
			bad("volume %s has a type the restricted policies do not allow", vol.Name)
		}
	}
	containers := slices.Concat(spec.InitContainers, spec.Containers)
	if len(containers) == 0 {
		bad("no containers")
	}
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.Privileged != nil && *sc.Privileged {
			bad("container %s is privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("container %s must set allowPrivilegeEscalation: false", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			bad("container %s must drop ALL capabilities", c.Name)
		}
		if sc.Capabilities != nil {
			for _, add := range sc.Capabilities.Add {
				if add != "NET_BIND_SERVICE" {
					bad("container %s adds capability %s", c.Name, add)
				}
			}
		}
		nonRoot := podNonRoot
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		if !nonRoot {
			bad("container %s must run as non-root (runAsNonRoot: true)", c.Name)
		}
		if sc.RunAsUser != nil || sc.RunAsGroup != nil {
			bad("container %s fixes a UID or GID; OpenShift's restricted-v2 SCC assigns them", c.Name)
		}
		seccomp := podSeccomp
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
		}
		if !seccomp {
			bad("container %s must use the RuntimeDefault seccomp profile", c.Name)
		}
		if sc.SELinuxOptions != nil {
			bad("container %s sets SELinux options", c.Name)
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				bad("container %s uses host port %d", c.Name, p.HostPort)
			}
		}
	}
	return v
}
