package wire_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// machineDirs records the directories the wire test creates on the machine
// outside its temporary directory: mount points for the pods' volumes (such
// as /etc/mpi) and /etc/netns. The suite removes exactly those at the end.
type machineDirs struct {
	mu      sync.Mutex
	created []string
}

// mkdirAll creates path and its missing parents, remembering which it made.
func (m *machineDirs) mkdirAll(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("mount point %q is not absolute", path)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := "/"
	for _, part := range strings.Split(filepath.Clean(path), "/")[1:] {
		dir = filepath.Join(dir, part)
		err := os.Mkdir(dir, 0o755)
		switch {
		case err == nil:
			m.created = append(m.created, dir)
		case !errors.Is(err, os.ErrExist):
			return fmt.Errorf("creating mount point %s: %w", dir, err)
		}
	}
	return nil
}

// removeAll removes what mkdirAll created, deepest first. Directories that
// something else has since put files in stay.
func (m *machineDirs) removeAll() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for i := len(m.created) - 1; i >= 0; i-- {
		err := os.Remove(m.created[i])
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) {
			errs = append(errs, err)
		}
	}
	m.created = nil
	return errors.Join(errs...)
}
