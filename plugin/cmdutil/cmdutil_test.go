package cmdutil

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestCode(t *testing.T) {
	cases := map[string]struct {
		err  error
		want int
	}{
		"nil":            {nil, ExitOK},
		"plain":          {errors.New("x"), ExitFailure},
		"usage":          {UsageError("bad %s", "flag"), ExitUsage},
		"wrapped failed": {fmt.Errorf("ctx: %w", WithCode(ExitJobFailed, errors.New("failed"))), ExitJobFailed},
		"timeout":        {WithCode(ExitTimeout, nil), ExitTimeout},
	}
	for name, tc := range cases {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("%s: Code() = %d, want %d", name, got, tc.want)
		}
	}
	if !Silent(WithCode(3, nil)) || Silent(WithCode(3, errors.New("x"))) {
		t.Error("Silent() is wrong")
	}
}

// Off a terminal, progress writes each new state once, on its own line.
func TestProgressOffTerminal(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b)
	p.UpdateState("pi: Pending", " (1s)")
	p.UpdateState("pi: Pending", " (2s)")
	p.UpdateState("pi: Running", " (3s)")
	p.Done()
	if want := "pi: Pending\npi: Running\n"; b.String() != want {
		t.Errorf("progress = %q, want %q", b.String(), want)
	}
}
