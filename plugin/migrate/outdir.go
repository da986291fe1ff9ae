package migrate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/torus-mpi/torus/plugin/cmdutil"
)

// outputFile is one file of an output directory, rendered before any is
// written.
type outputFile struct {
	// Path is relative to the output directory.
	Path string
	Data []byte
	// Source names the input whose results it holds.
	Source string
}

// planDir renders the file each input gets under dir (inputs that produce
// nothing get none) and refuses, before anything is written, a plan that
// would lose something: inputs whose results would go to one file, each
// replacing the one before, and results that would go over an input that
// was read. The refusal lists every such problem with the inputs it
// concerns, and what to do about it.
func planDir(dir string, inputs []inputFile, format outputFormat) ([]outputFile, error) {
	var outs []outputFile
	for _, in := range inputs {
		produced := false
		for _, it := range in.Items {
			o, err := it.Outputs()
			if err != nil {
				return nil, err
			}
			produced = produced || len(o) > 0 || it.Blank
		}
		if !produced {
			continue
		}
		var buf bytes.Buffer
		if err := write(&buf, in.Items, format); err != nil {
			return nil, err
		}
		outs = append(outs, outputFile{Path: filepath.Clean(in.OutPath), Data: buf.Bytes(), Source: in.Source})
	}
	clashes := clashingOutputs(dir, outs)
	overInputs := outputsOverInputs(dir, outs, inputs)
	if len(clashes) == 0 && len(overInputs) == 0 {
		return outs, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--output-dir %s: nothing was written, as writing would lose results or inputs:", dir)
	for _, p := range append(clashes, overInputs...) {
		b.WriteString("\n  " + p)
	}
	if len(clashes) > 0 {
		b.WriteString("\nInputs whose results share a file name need an --output-dir each (a run per input), or names that differ.")
	}
	if len(overInputs) > 0 {
		b.WriteString("\nChoose an --output-dir that holds none of the inputs (one that does not exist yet is created).")
	}
	return nil, cmdutil.UsageError("%s", b.String())
}

// clashingOutputs describes each file of dir that two or more inputs'
// results would be written to, in the order of the inputs.
func clashingOutputs(dir string, outs []outputFile) []string {
	sources := map[string][]string{}
	var paths []string
	for _, o := range outs {
		if _, ok := sources[o.Path]; !ok {
			paths = append(paths, o.Path)
		}
		sources[o.Path] = append(sources[o.Path], o.Source)
	}
	var problems []string
	for _, p := range paths {
		switch s := sources[p]; len(s) {
		case 1:
		case 2:
			problems = append(problems, fmt.Sprintf("%s and %s would both be written to %s, the second replacing the first",
				s[0], s[1], filepath.Join(dir, p)))
		default:
			problems = append(problems, fmt.Sprintf("%s and %s would all be written to %s, each replacing the one before",
				strings.Join(s[:len(s)-1], ", "), s[len(s)-1], filepath.Join(dir, p)))
		}
	}
	return problems
}

// outputsOverInputs describes each result that would be written over an
// input that was read: one of the same path, or the same file under
// another (a directory given twice through a link, a hard link).
func outputsOverInputs(dir string, outs []outputFile, inputs []inputFile) []string {
	byPath := map[string]inputFile{}
	var byFile files[inputFile]
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		if abs, err := filepath.Abs(in.Path); err == nil {
			byPath[abs] = in
		}
		if st, err := os.Lstat(in.Path); err == nil {
			byFile.add(st, in)
		}
	}
	var problems []string
	for _, o := range outs {
		target := filepath.Join(dir, o.Path)
		in, found := inputFile{}, false
		if abs, err := filepath.Abs(target); err == nil {
			in, found = byPath[abs]
		}
		if st, err := os.Lstat(target); err == nil && !found {
			in, found = byFile.find(st)
		}
		if !found {
			continue
		}
		as := ""
		if filepath.Clean(in.Path) != target {
			as = " (as " + target + ")"
		}
		if in.Source == o.Source {
			problems = append(problems, fmt.Sprintf("%s would be written over with its own results%s", in.Source, as))
		} else {
			problems = append(problems, fmt.Sprintf("%s would be written over with the results of %s%s", in.Source, o.Source, as))
		}
	}
	return problems
}

// writtenFile is a file writeDir has written.
type writtenFile struct {
	path, source string
}

// sameAsWritten refuses to write path when it is a file written a moment
// ago under another name: on a file system that does not tell the case of
// names apart (A.yaml and a.yaml), or through a hard link left from
// before. planDir cannot see that before the first of the two exists.
func sameAsWritten(path, source string, done files[writtenFile]) error {
	st, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	w, ok := done.find(st)
	if !ok {
		return nil
	}
	return fmt.Errorf("%s is the file %s, just written with the results of %s (the file system does not tell the two names apart, or they are links to one file): the results of %s would replace them; rename one of the two inputs, or write to an empty --output-dir",
		path, w.path, w.source, source)
}

// files are files seen, each with what it stands for, to tell whether
// another name is one of them (os.SameFile). A run has few inputs and
// outputs: a look at each is cheap.
type files[T any] []statted[T]

type statted[T any] struct {
	info  os.FileInfo
	value T
}

func (x *files[T]) add(st os.FileInfo, v T) {
	*x = append(*x, statted[T]{info: st, value: v})
}

func (x files[T]) find(st os.FileInfo) (T, bool) {
	for _, e := range x {
		if os.SameFile(st, e.info) {
			return e.value, true
		}
	}
	var zero T
	return zero, false
}
