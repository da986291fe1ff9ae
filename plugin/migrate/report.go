package migrate

import (
	"errors"
	"fmt"
	"strings"
)

// Level says how much a finding matters.
type Level int

const (
	// LevelNote informs: a field moved, or a default that behaves the same.
	LevelNote Level = iota
	// LevelChange reports a value rewritten so that it keeps its intent on
	// Torus (a container renamed, an sshd configuration path replaced).
	LevelChange
	// LevelWarning reports a field without an exact equivalent and what was
	// done with it. --strict fails on warnings.
	LevelWarning
	// LevelError reports a document that could not be converted.
	LevelError
)

func (l Level) String() string {
	switch l {
	case LevelNote:
		return "note"
	case LevelChange:
		return "changed"
	case LevelWarning:
		return "warning"
	default:
		return "error"
	}
}

// Finding is one thing the user should know about a conversion.
type Finding struct {
	Level Level
	// Field is the input field the finding is about, e.g.
	// spec.runPolicy.cleanPodPolicy; empty for the whole document.
	Field string
	// Message says what was found and what was done.
	Message string
	// Line is the line of Field (or of the document) in the source, from 1;
	// 0 when unknown.
	Line int

	path fieldPath
}

func (f Finding) String() string {
	if f.Field == "" {
		return f.Level.String() + ": " + f.Message
	}
	return f.Level.String() + ": " + f.Field + ": " + f.Message
}

// reporter collects findings.
type reporter struct {
	findings []Finding
}

func (r *reporter) add(level Level, p fieldPath, format string, args ...any) {
	r.findings = append(r.findings, Finding{Level: level, Field: p.String(), Message: fmt.Sprintf(format, args...), path: p})
}

func (r *reporter) note(p fieldPath, format string, args ...any) {
	r.add(LevelNote, p, format, args...)
}

func (r *reporter) change(p fieldPath, format string, args ...any) {
	r.add(LevelChange, p, format, args...)
}

func (r *reporter) warn(p fieldPath, format string, args ...any) {
	r.add(LevelWarning, p, format, args...)
}

func (r *reporter) fail(p fieldPath, format string, args ...any) {
	r.add(LevelError, p, format, args...)
}

func (r *reporter) failed() bool { return countLevel(r.findings, LevelError) > 0 }

func countLevel(fs []Finding, l Level) int {
	n := 0
	for _, f := range fs {
		if f.Level == l {
			n++
		}
	}
	return n
}

// findingsError joins the error findings of a document into one error.
func findingsError(fs []Finding) error {
	var msgs []string
	for _, f := range fs {
		if f.Level == LevelError {
			if f.Field != "" {
				msgs = append(msgs, f.Field+": "+f.Message)
			} else {
				msgs = append(msgs, f.Message)
			}
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}
