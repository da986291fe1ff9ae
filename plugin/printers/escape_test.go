package printers

import (
	"bytes"
	"testing"
)

func TestEscaping(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"plain text, tabs and newlines":       {"job\tpi\nrank 0\n", "job\tpi\nrank 0\n"},
		"a screen clear":                      {"\x1b[2J\x1b[Hmessage", "^[[2J^[[Hmessage"},
		"a carriage return over a line":       {"done\rfailed", `done\rfailed`},
		"a bell and a backspace":              {"a\x07b\x08c", `a\x07b\x08c`},
		"C1's CSI, which some terminals obey": {"\u009b2J", `\x9b2J`},
		"other scripts pass":                  {"ранг 0 — 完成", "ранг 0 — 完成"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			n, err := Escaping(&b).Write([]byte(tc.in))
			if err != nil || n != len(tc.in) {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(tc.in))
			}
			if b.String() != tc.want {
				t.Errorf("wrote %q, want %q", b.String(), tc.want)
			}
		})
	}
}
