package app

import (
	"fmt"
	"io"
	"os"
)

// maxInput bounds what -f reads from a file or standard input: far more
// than any manifest of jobs, and little enough that a wrong file (an image,
// a log, /dev/zero) ends in a clear error rather than in memory exhaustion.
const maxInput = 64 << 20

// readAllLimited reads r to its end, or fails once it passes maxInput.
func readAllLimited(r io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("%s is larger than %d MiB: it cannot be a manifest; check the -f argument", what, maxInput>>20)
	}
	return data, nil
}

// readFileLimited reads a file of at most maxInput bytes.
func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllLimited(f, path)
}
