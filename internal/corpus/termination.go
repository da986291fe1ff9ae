package corpus

import (
	"regexp"
	"strings"
)

// recorderNote is the bracketed line the GPU corpus's recorder wrote after
// each process's output ("[exit code 1 of process 0]", "[mpirun was still
// running ...]"): not the program's words.
var recorderNote = regexp.MustCompile(`(?m)^\[(?:exit code [0-9]+.*|mpirun was still running.*)\]$`)

// Program is a recording's output without the recorder's notes.
func Program(recording string) string {
	return recorderNote.ReplaceAllString(recording, "")
}

// KubeletTail is what the kubelet keeps of a container's output as its
// termination message under FallbackToLogsOnError: the last 80 lines, and
// of those the last 2 KiB.
func KubeletTail(out string) string {
	lines := strings.SplitAfter(out, "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	s := strings.Join(lines, "")
	if len(s) > 2048 {
		s = s[len(s)-2048:]
	}
	return s
}
