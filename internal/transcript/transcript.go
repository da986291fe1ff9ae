// Package transcript reads the shell sessions a document shows, so that a
// test can run their commands and hold the document to what they print.
//
// A session is a Markdown code block fenced as "console". In it, a line
// starting with "$ " is a command (a trailing backslash continues it on
// the next line), and the lines up to the next command or the end of the
// block are what it prints. A printed line "..." stands for any number of
// lines, and the figures that differ from run to run (durations, ages,
// accuracies, digests, the suffixes of pod names) are compared by their
// shape only: see Match.
package transcript

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Step is one command of a document and what the document says it prints.
type Step struct {
	// Line is the command's line in the document, counted from 1.
	Line    int
	Command string
	Output  []string
}

// Parse reads every step of the document's console blocks, in order.
func Parse(r io.Reader) ([]Step, error) {
	var steps []Step
	var step *Step
	in, continued := false, false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !in:
			if trimmed == "```console" {
				in = true
			}
			continue
		case trimmed == "```":
			if continued {
				return nil, fmt.Errorf("line %d: the block ends inside the command of line %d", n, step.Line)
			}
			in, step = false, nil
			continue
		}
		switch {
		case continued:
			step.Command += "\n" + line
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, Step{Line: n, Command: strings.TrimPrefix(line, "$ ")})
			step = &steps[len(steps)-1]
		case step == nil:
			return nil, fmt.Errorf("line %d: output before any command of its block", n)
		default:
			step.Output = append(step.Output, strings.TrimRight(line, " \t"))
			continue
		}
		continued = strings.HasSuffix(line, `\`)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if in {
		return nil, fmt.Errorf("a console block is not closed")
	}
	return steps, nil
}

// shapes are what differs between runs of the same command, each replaced
// by a token that keeps its kind: a pod's generated suffix, a digest, a
// number (with its decimals and unit, if any).
var shapes = []struct {
	re    *regexp.Regexp
	token string
}{
	// A Job's pod: <job>-<index>-<suffix>.
	{regexp.MustCompile(`(-\d+)-[a-z0-9]{5}\b`), "$1-<suffix>"},
	{regexp.MustCompile(`\b[0-9a-f]{40,}\b`), "<digest>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), "<time>"},
	{regexp.MustCompile(`\b(\d+(\.\d+)?(ms|s|m|h|d))+\b`), "<n>"},
	{regexp.MustCompile(`\d+(\.\d+)?`), "<n>"},
}

// shape replaces the parts of a line that differ from run to run.
func shape(line string) string {
	for _, s := range shapes {
		line = s.re.ReplaceAllString(line, s.token)
	}
	return line
}

// Match reports whether a command's output is what the document shows:
// line for line, where "..." takes any number of lines and numbers,
// digests, times and pod suffixes match any of their kind. Trailing
// blanks and a last empty line do not count.
func Match(want []string, got string) bool {
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if got == "" {
		lines = nil
	}
	for i := range lines {
		lines[i] = shape(strings.TrimRight(lines[i], " \t"))
	}
	shaped := make([]string, len(want))
	for i, w := range want {
		shaped[i] = w
		if w != "..." {
			shaped[i] = shape(w)
		}
	}
	return match(shaped, lines)
}

// match is a glob over lines: memoised, since "..." may take any span.
func match(want, got []string) bool {
	memo := map[[2]int]bool{}
	var at func(i, j int) bool
	at = func(i, j int) bool {
		if r, ok := memo[[2]int{i, j}]; ok {
			return r
		}
		var r bool
		switch {
		case i == len(want):
			r = j == len(got)
		case want[i] == "...":
			r = at(i+1, j) || (j < len(got) && at(i, j+1))
		default:
			r = j < len(got) && want[i] == got[j] && at(i+1, j+1)
		}
		memo[[2]int{i, j}] = r
		return r
	}
	return at(0, 0)
}
