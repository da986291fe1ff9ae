// Command historycheck fails when the repository's text speaks of its own
// making: README, docs, comments, test names and benchmark reports say what
// Torus does and under which conditions a figure holds; git log keeps the
// history. It reads every file git tracks, but for text Torus does not
// write (go.sum, the Trainer CRDs generated from upstream's API).
//
//	go run ./hack/historycheck   # from the repository's root, as make lint does
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// phrases are the ways the history of a change finds its way into text.
var phrases = []struct {
	re  *regexp.Regexp
	say string
}{
	{regexp.MustCompile(`(?i)\bsessions? [0-9]+`), "names a work session"},
	{regexp.MustCompile(`(?i)(^|[^#/\w])issues? [0-9]+\b`), "names a tracker issue (an upstream one is owner/repo#N)"},
	{regexp.MustCompile(`(?i)\bmeasured here\b`), `says "measured here": name the conditions (cores, versions, N) instead`},
	{regexp.MustCompile(`(?i)\bthis 2-core machine\b`), `names "this machine": name the conditions instead`},
	{regexp.MustCompile(`(?i)\breported blocked\b`), "reports on the tracker"},
	{regexp.MustCompile(`(?i)(^|[^\w])(?:it|we|torus|this|that) used to\b`), "tells what the code used to do"},
}

// skipped are files whose text is not Torus's own.
func skipped(path string) bool {
	return path == "go.sum" || strings.HasSuffix(path, "/go.sum") || strings.HasSuffix(path, ".work.sum") ||
		strings.HasPrefix(path, "kustomize/crd/trainer/") ||
		strings.HasPrefix(path, "bundle/manifests/trainer.kubeflow.org_") ||
		strings.HasPrefix(path, "hack/historycheck/")
}

// findings are the phrases of a line that speak of history, each with why.
func findings(line string) []string {
	var out []string
	for _, p := range phrases {
		if m := p.re.FindString(line); m != "" {
			out = append(out, fmt.Sprintf("%q %s", strings.TrimSpace(m), p.say))
		}
	}
	return out
}

func main() {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "historycheck: listing the tracked files:", err)
		os.Exit(2)
	}
	found := 0
	for _, path := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if path == "" || skipped(path) {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree
			}
			fmt.Fprintf(os.Stderr, "historycheck: %v\n", err)
			os.Exit(2)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for line := 1; sc.Scan(); line++ {
			for _, f := range findings(sc.Text()) {
				fmt.Printf("%s:%d: %s\n", path, line, f)
				found++
			}
		}
	}
	if found > 0 {
		fmt.Printf("historycheck: %d places speak of the project's history; say what the product does and under which conditions\n", found)
		os.Exit(1)
	}
}
