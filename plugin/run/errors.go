package run

import (
	"errors"
	"fmt"
)

// inputError is a problem of a job's input under the field it concerns: a
// flag's name ("workers"), "name" or "command" for the job's name and
// command, "" for the whole job. The command line prints its message; the
// dashboard's form shows it under that field.
type inputError struct {
	field string
	err   error
}

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// fieldErr is a problem of one field, in run's words.
func fieldErr(field, format string, args ...any) error {
	return &inputError{field: field, err: fmt.Errorf(format, args...)}
}

// fieldErrors files each problem an error holds (one, or many joined)
// under its field, "" where it names none.
func fieldErrors(err error) []FieldError {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []FieldError
		for _, e := range joined.Unwrap() {
			out = append(out, fieldErrors(e)...)
		}
		return out
	}
	var ie *inputError
	if errors.As(err, &ie) {
		return []FieldError{{Field: ie.field, Message: err.Error()}}
	}
	return []FieldError{{Message: err.Error()}}
}
