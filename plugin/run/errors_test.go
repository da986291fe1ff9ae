package run

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each problem lands under the field its maker named, whatever wraps or
// joins it; one that names none is the whole job's.
func TestFieldErrors(t *testing.T) {
	err := errors.Join(
		fieldErr(flagWorkers, "--workers=0: a job needs at least 1 worker"),
		fmt.Errorf("checking: %w", fieldErr(flagQueue, "LocalQueue %q not found", "q")),
		errors.Join(fieldErr("name", "a job needs a name"), errors.New("the API server is down")),
	)
	want := []FieldError{
		{Field: "workers", Message: "--workers=0: a job needs at least 1 worker"},
		{Field: "queue", Message: `checking: LocalQueue "q" not found`},
		{Field: "name", Message: "a job needs a name"},
		{Message: "the API server is down"},
	}
	if diff := cmp.Diff(want, fieldErrors(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if fieldErrors(nil) != nil {
		t.Error("no error is no problem")
	}
}
