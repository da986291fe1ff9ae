package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxInput bounds what -f reads from a file or standard input: far more
// than any manifest of jobs, and little enough that a wrong file (an image,
// a log, /dev/zero) ends in a clear error rather than in memory exhaustion.
const maxInput = 64 << 20

// ReadAll reads r to its end, or fails once it passes maxInput. what names
// the input in errors.
func ReadAll(r io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("%s is larger than %d MiB: it cannot be a manifest; check the -f argument", what, maxInput>>20)
	}
	return data, nil
}

// ReadFile reads a file of at most maxInput bytes.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, path)
}

// errNotRegular is returned for a path that is not a regular file: a
// symbolic link, a FIFO, a device, a socket or a directory.
var errNotRegular = errors.New("not a regular file")

// ReadRegularFile reads a regular file of at most maxInput bytes, and
// refuses anything else without following it or waiting on it: the path
// is opened without following a symbolic link and without blocking (a
// FIFO would wait for a writer), then checked on the open file.
func ReadRegularFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollow|openNonBlock, 0)
	if err != nil {
		if st, lerr := os.Lstat(path); lerr == nil && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: %w (%s)", path, errNotRegular, kind(st.Mode()))
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, errNotRegular, kind(st.Mode()))
	}
	return ReadAll(f, path)
}

// CreateRegularFile creates or truncates a regular file for writing,
// refusing to write through a symbolic link or into anything else (a FIFO,
// a device) that stands at path.
func CreateRegularFile(path string, perm os.FileMode) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s): refusing to write through it", path, errNotRegular, kind(st.Mode()))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|openNoFollow|openNonBlock, perm)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w: refusing to write into it", path, errNotRegular)
	}
	return f, nil
}

// MkdirNoFollow makes dir and its missing parents below root, each a real
// directory: a component that exists as a symbolic link or a file is
// refused rather than followed. root itself is the caller's to trust.
func MkdirNoFollow(root, dir string, perm os.FileMode) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is not under %s", dir, root)
	}
	p := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." || part == "" {
			continue
		}
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		switch {
		case os.IsNotExist(err):
			if err := os.Mkdir(p, perm); err != nil && !os.IsExist(err) {
				return err
			}
			if st, err = os.Lstat(p); err != nil {
				return err
			}
			if !st.IsDir() {
				return fmt.Errorf("%s is not a directory (%s): refusing to write through it", p, kind(st.Mode()))
			}
		case err != nil:
			return err
		case !st.IsDir():
			return fmt.Errorf("%s is not a directory (%s): refusing to write through it", p, kind(st.Mode()))
		}
	}
	return nil
}

// StdinOnce refuses -f - (standard input) given more than once: the second
// would read nothing.
func StdinOnce(filenames []string) error {
	stdin := 0
	for _, f := range filenames {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return UsageError("-f - (standard input) can be given once")
	}
	return nil
}

// kind names what a file is, for errors.
func kind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}
