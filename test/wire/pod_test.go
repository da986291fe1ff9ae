package wire_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// pod plays one pod of the JobSet on this machine. It has a network
// namespace of its own (one address on the job's bridge), and every process
// started in it gets a private mount namespace, with the pod's volumes at
// the paths its container mounts them, and a UTS namespace carrying the
// pod's host name. Its volumes live under dir on the machine.
type pod struct {
	hostname string
	address  string
	netns    string
	dir      string
	spec     *corev1.PodSpec
	// labels are the pod's, as JobSet labels a first run's pods; the
	// downward API reads them.
	labels map[string]string
	tc     *toolchain
	// hidden are directories a pod's processes must not see: where every
	// pod's volumes are kept, so that no pod reads another's keys.
	hidden []string
}

// volumePath is where a volume of the pod lives on the machine.
func (p *pod) volumePath(name string) string { return filepath.Join(p.dir, "volumes", name) }

// user is whom a container runs as: its security context's UID, else the
// pod's, else the image's user. The group is the security context's, else
// the image's group for the image's user and 0 for any other UID (a
// container runtime's primary group for a UID without an account, as
// OpenShift's pods have).
func (p *pod) user(ctr *corev1.Container) podUser {
	var uid, gid *int64
	if sc := p.spec.SecurityContext; sc != nil {
		uid, gid = sc.RunAsUser, sc.RunAsGroup
	}
	if sc := ctr.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	u := imageUser
	if uid != nil && *uid != imageUser.uid {
		u = podUser{uid: *uid, gid: 0}
	}
	if gid != nil {
		u.gid = *gid
	}
	return u
}

// env is a container's environment as a container runtime builds it: the
// image's PATH, the user's HOME, HOSTNAME, then the container's own
// variables, which win.
func (p *pod) env(ctr *corev1.Container) ([]string, error) {
	// A container runtime sets HOME from the image's account, "/" for a
	// UID the image has none for.
	home := "/"
	if p.user(ctr).uid == imageUser.uid {
		home = imageHome
	}
	names := []string{"PATH", "HOME", "HOSTNAME"}
	values := map[string]string{"PATH": p.tc.imagePath(), "HOME": home, "HOSTNAME": p.hostname}
	for _, e := range ctr.Env {
		value := e.Value
		if e.ValueFrom != nil {
			label, ok := labelField(e.ValueFrom)
			if !ok {
				return nil, fmt.Errorf("container %s: variable %s comes from %v, which the wire test does not resolve", ctr.Name, e.Name, e.ValueFrom)
			}
			value = p.labels[label] // "" for a missing label, as the kubelet gives
		}
		if _, ok := values[e.Name]; !ok {
			names = append(names, e.Name)
		}
		values[e.Name] = value
	}
	env := make([]string, 0, len(names))
	for _, n := range names {
		env = append(env, n+"="+values[n])
	}
	return env, nil
}

// labelField reads the label a downward API field reference names
// (metadata.labels['KEY']).
func labelField(src *corev1.EnvVarSource) (string, bool) {
	if src.FieldRef == nil {
		return "", false
	}
	path := src.FieldRef.FieldPath
	if !strings.HasPrefix(path, "metadata.labels['") || !strings.HasSuffix(path, "']") {
		return "", false
	}
	return strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']"), true
}

// argv is the command line that runs process in container ctr of the pod,
// and a description of it for logs:
// it enters the pod's network namespace (where `ip netns exec` also mounts
// the pod's hosts, passwd and group files over /etc's), makes a mount and a
// UTS namespace, sets the host name, mounts the container's volumes, hides
// every pod's volume directories, and becomes the container's user without
// privileges (allowPrivilegeEscalation: false, capabilities dropped) and
// with exactly the container's environment.
func (p *pod) argv(ctr *corev1.Container, process []string) (argv []string, what string, err error) {
	if len(process) == 0 {
		return nil, "", fmt.Errorf("container %s has no command", ctr.Name)
	}
	if strings.Contains(process[0], "=") {
		return nil, "", fmt.Errorf("container %s: command %q would be read by env(1) as a variable", ctr.Name, process[0])
	}
	u := p.user(ctr)
	env, err := p.env(ctr)
	if err != nil {
		return nil, "", err
	}

	var s strings.Builder
	s.WriteString("set -eu\n")
	fmt.Fprintf(&s, "printf %%s %s >/proc/sys/kernel/hostname\n", shellQuote(p.hostname))
	for _, m := range ctr.VolumeMounts {
		if m.SubPathExpr != "" {
			return nil, "", fmt.Errorf("container %s: subPathExpr mounts are not simulated", ctr.Name)
		}
		if !p.hasVolume(m.Name) {
			return nil, "", fmt.Errorf("container %s mounts volume %q, which the pod does not have", ctr.Name, m.Name)
		}
		source, err := p.subPath(m)
		if err != nil {
			return nil, "", fmt.Errorf("container %s: %w", ctr.Name, err)
		}
		fmt.Fprintf(&s, "mount --bind %s %s\n", shellQuote(source), shellQuote(m.MountPath))
		if m.ReadOnly {
			fmt.Fprintf(&s, "mount -o remount,bind,ro %s\n", shellQuote(m.MountPath))
		}
	}
	// Pods have their own /dev/shm, where MPI keeps shared-memory segments.
	s.WriteString("mount -t tmpfs -o mode=1777,size=64m shm /dev/shm\n")
	for _, h := range p.hidden {
		fmt.Fprintf(&s, "mount -t tmpfs -o mode=0755,size=64k hidden %s\n", shellQuote(h))
	}
	fmt.Fprintf(&s, "exec setpriv --reuid=%d --regid=%d --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- env -i \"$@\"\n", u.uid, u.gid)

	argv = []string{"ip", "netns", "exec", p.netns,
		"unshare", "--mount", "--uts", "--propagation", "private", "--",
		"/bin/sh", "-c", s.String(), "torus-wire-pod"}
	argv = append(append(argv, env...), process...)
	what = fmt.Sprintf("[pod %s, container %s, uid %d] env -i %s %s",
		p.hostname, ctr.Name, u.uid, strings.Join(env, " "), shortCommand(process))
	return argv, what, nil
}

// subPath is what a mount binds: the volume, or the path in it the mount
// names, which the kubelet creates as a directory with the volume's mode if
// it does not exist yet (when the container starts, after init containers).
func (p *pod) subPath(m corev1.VolumeMount) (string, error) {
	root := p.volumePath(m.Name)
	if m.SubPath == "" {
		return root, nil
	}
	if !filepath.IsLocal(m.SubPath) {
		return "", fmt.Errorf("subPath %q of volume %s leaves the volume", m.SubPath, m.Name)
	}
	path := filepath.Join(root, m.SubPath)
	if _, err := os.Lstat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	st, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	return path, makeDir(path, st.Mode().Perm())
}

func (p *pod) hasVolume(name string) bool {
	for _, v := range p.spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

// mountPoints are the paths a container mounts volumes at; they must exist
// on the machine for bind mounts to land on.
func mountPoints(ctr *corev1.Container) []string {
	paths := make([]string, 0, len(ctr.VolumeMounts))
	for _, m := range ctr.VolumeMounts {
		paths = append(paths, m.MountPath)
	}
	return paths
}

// process is a container's command line: command then args.
func process(ctr *corev1.Container) []string {
	return append(append([]string(nil), ctr.Command...), ctr.Args...)
}
