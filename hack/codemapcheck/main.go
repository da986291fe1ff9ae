// Command codemapcheck fails when the code map of
// docs/contributors/architecture.md does not name every package of the
// workspace, or names one that is gone: the table is where a newcomer
// finds their way, and a package it leaves out is one nobody finds.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/torus-mpi/torus/hack/repo"
)

const (
	module = "github.com/torus-mpi/torus/"
	doc    = "docs/contributors/architecture.md"
)

// row is a code map row: its first cell names a package.
var row = regexp.MustCompile("^\\| `([a-z0-9_./-]+)` \\|")

func main() {
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "codemapcheck:", err)
		os.Exit(1)
	}
}

func check() error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	out, err := exec.Command("go", "list", "-C", root, "./...", "./hack/...", "./test/...").Output()
	if err != nil {
		return fmt.Errorf("listing the packages: %w", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, module))
	}
	data, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		return err
	}
	mapped := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data[bytes.Index(data, []byte("## Code map")):]))
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			mapped[m[1]] = true
		}
	}
	var problems []string
	for _, p := range pkgs {
		if !mapped[p] {
			problems = append(problems, fmt.Sprintf("package %s has no row: add one saying what it is", p))
		}
		delete(mapped, p)
	}
	for p := range mapped {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			problems = append(problems, fmt.Sprintf("row %s names no directory: remove it", p))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("the code map of %s:\n  %s", doc, strings.Join(problems, "\n  "))
	}
	return nil
}
