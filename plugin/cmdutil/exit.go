// Package cmdutil holds what every kubectl-mpi command shares: exit codes,
// usage errors, the Complete/Validate/Run shape and its cobra glue
// (arguments, job name completion), bounded input and the progress line of
// long waits.
package cmdutil

import (
	"errors"
	"fmt"
)

// Exit codes of kubectl-mpi. Scripts may rely on them; docs/users/plugin.md lists
// them.
const (
	// ExitOK: the command did what was asked (for run --wait and wait: the
	// job reached the condition).
	ExitOK = 0
	// ExitFailure: the command failed (API errors, unknown jobs, permission
	// denied, invalid manifests).
	ExitFailure = 1
	// ExitUsage: the command line is wrong (unknown flags, bad values,
	// missing arguments); nothing was sent to the cluster.
	ExitUsage = 2
	// ExitJobFailed: run --wait, run --follow and wait saw the job fail (or
	// reach a terminal state other than the one waited for).
	ExitJobFailed = 3
	// ExitTimeout: --timeout passed before the job reached the condition.
	ExitTimeout = 4
)

// ExitError carries an exit code with an error. A nil Err exits silently
// with Code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError marks an error in the command line.
func UsageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// AsUsage marks err as a command-line error.
func AsUsage(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// WithCode attaches an exit code to err.
func WithCode(code int, err error) error {
	return &ExitError{Code: code, Err: err}
}

// Code is the exit code for an error returned by a command: 0 for nil, the
// code of an ExitError, 1 otherwise.
func Code(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitFailure
}

// Silent reports whether err only carries an exit code and has nothing to
// print (the command already said why).
func Silent(err error) bool {
	var e *ExitError
	return errors.As(err, &e) && e.Err == nil
}
