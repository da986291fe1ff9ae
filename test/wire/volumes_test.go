package wire_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Modes the kubelet uses when a volume says nothing.
const (
	defaultProjectedMode = 0o644
	// emptyDirMode is how the kubelet creates emptyDirs: world-writable and
	// owned by root, which is why the operator's init script makes the SSH
	// directory inside one, for sshd's StrictModes.
	emptyDirMode = 0o777
)

// materialise writes a pod's volumes as the kubelet would, from the objects
// the operator created: Secret and ConfigMap keys as root-owned files with
// the volume's modes, emptyDirs as empty world-writable directories.
func (p *pod) materialise(secrets map[string]*corev1.Secret, configMaps map[string]*corev1.ConfigMap) error {
	if sc := p.spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return fmt.Errorf("pod sets fsGroup, whose group ownership of volumes the wire test does not simulate")
	}
	for _, v := range p.spec.Volumes {
		dir := p.volumePath(v.Name)
		var err error
		switch {
		case v.Secret != nil:
			s, ok := secrets[v.Secret.SecretName]
			if !ok {
				return fmt.Errorf("volume %s: Secret %s is not one the operator made for this job", v.Name, v.Secret.SecretName)
			}
			err = writeKeys(dir, s.Data, v.Secret.Items, v.Secret.DefaultMode)
		case v.ConfigMap != nil:
			cm, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				return fmt.Errorf("volume %s: ConfigMap %s is not one the operator made for this job", v.Name, v.ConfigMap.Name)
			}
			data := make(map[string][]byte, len(cm.Data))
			for k, val := range cm.Data {
				data[k] = []byte(val)
			}
			err = writeKeys(dir, data, v.ConfigMap.Items, v.ConfigMap.DefaultMode)
		case v.EmptyDir != nil:
			err = makeDir(dir, emptyDirMode)
		default:
			return fmt.Errorf("volume %s: only Secret, ConfigMap and emptyDir volumes are simulated", v.Name)
		}
		if err != nil {
			return fmt.Errorf("volume %s of %s: %w", v.Name, p.hostname, err)
		}
	}
	return nil
}

// writeKeys projects keys into dir: all of them, or the items named, each
// with its item mode or the volume's default mode.
func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32) error {
	mode := os.FileMode(defaultProjectedMode)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	if len(items) == 0 {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	if err := makeDir(dir, 0o755); err != nil {
		return err
	}
	for _, it := range items {
		content, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("key %s is missing", it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		path := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, m); err != nil {
			return err
		}
		// WriteFile's mode passes through the umask; the volume's does not.
		if err := os.Chmod(path, m); err != nil {
			return err
		}
	}
	return nil
}

// makeDir creates a directory with exactly mode, whatever the umask.
func makeDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
