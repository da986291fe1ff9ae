package cmdutil

import (
	"strings"
	"testing"
)

func TestReadAllLimited(t *testing.T) {
	if data, err := ReadAll(strings.NewReader("kind: MPIJob\n"), "standard input"); err != nil || string(data) != "kind: MPIJob\n" {
		t.Fatalf("a manifest: %q, %v", data, err)
	}
	// An endless input (as /dev/zero) ends in an error naming the limit.
	_, err := ReadAll(zeros{}, "standard input")
	if err == nil || !strings.Contains(err.Error(), "standard input is larger than 64 MiB") {
		t.Fatalf("error = %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
