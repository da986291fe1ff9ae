package printers

import (
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Escaping writes through to w with the terminal's control characters made
// visible, so that text from the server (names, annotations, commands,
// messages) cannot move the cursor, clear the screen or retitle the window
// of whoever reads it. ESC and CR are written as kubectl writes them ("^[",
// "\r"); other C0 and C1 controls but tab and newline as "\xNN" or
// "\uNNNN". logs, like kubectl logs, does not use it: a program's output
// is the user's own.
func Escaping(w io.Writer) io.Writer { return escaping{w} }

type escaping struct{ w io.Writer }

func (e escaping) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, escape(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escape makes a string's terminal control characters visible (Escaping).
func escape(s string) string {
	if !strings.ContainsFunc(s, control) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\x1b':
			b.WriteString("^[")
		case r == '\r':
			b.WriteString(`\r`)
		case !control(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// control reports a character a terminal acts on rather than shows.
func control(r rune) bool {
	return r != '\t' && r != '\n' && unicode.IsControl(r)
}
