package cmdutil

import (
	"fmt"
	"io"
	"os"
)

// MaxInput bounds what -f reads from a file or standard input: far more
// than any manifest of jobs, and little enough that a wrong file (an image,
// a log, /dev/zero) ends in a clear error rather than in memory exhaustion.
const MaxInput = 64 << 20

// ReadAll reads r to its end, or fails once it passes MaxInput. what names
// the input in errors.
func ReadAll(r io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if len(data) > MaxInput {
		return nil, fmt.Errorf("%s is larger than %d MiB: it cannot be a manifest; check the -f argument", what, MaxInput>>20)
	}
	return data, nil
}

// ReadFile reads a file of at most MaxInput bytes.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, path)
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
