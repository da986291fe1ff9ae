// Command failures prints, after a failed Ginkgo run, each failed spec
// with the end of its failure message. The Makefile runs it last so that
// the final lines of a test run, often all a CI summary keeps, say why a
// suite failed and not only where.
//
//	go run ./hack/failures DIR...
//
// It reads every ginkgo-report.json (written by -ginkgo.json-report) under
// the directories given.
package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// reportName is the file each suite's test binary writes in its package
// directory: go test runs every package's binary there, so one relative
// name gives each suite its own report.
const reportName = "ginkgo-report.json"

// tailLines of each failure message are printed: its cause comes last
// (a command's output ends with its error, Gomega's message with the
// expectation).
const tailLines = 15

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: failures DIR...")
		os.Exit(2)
	}
	var found int
	for _, dir := range os.Args[1:] {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != reportName {
				return err
			}
			n, err := printFailures(path)
			found += n
			return err
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "failures: %v\n", err)
			os.Exit(1)
		}
	}
	if found == 0 {
		fmt.Println("failures: no failed spec in the Ginkgo reports (the suite failed outside its specs: see above)")
	}
}

func printFailures(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	var n int
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if !s.State.Is(types.SpecStateFailureStates) {
				continue
			}
			n++
			fmt.Printf("=== %s %s: %s\n    at %s\n", strings.ToUpper(s.State.String()), r.SuiteDescription, s.FullText(), s.Failure.Location)
			msg := s.Failure.Message
			if s.Failure.ForwardedPanic != "" {
				msg += "\n" + s.Failure.ForwardedPanic
			}
			for _, line := range tail(msg, tailLines) {
				fmt.Printf("    %s\n", line)
			}
			// What the spec attached to its failure, such as its jobs'
			// descriptions and their pods' last lines.
			for _, e := range s.ReportEntries {
				fmt.Printf("    --- %s\n", e.Name)
				for _, line := range tail(e.StringRepresentation(), tailLines) {
					fmt.Printf("    %s\n", line)
				}
			}
		}
	}
	return n, nil
}

// tail returns the last n lines of s, trailing blank lines dropped.
func tail(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return lines
}
