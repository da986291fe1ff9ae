package migrate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/torus-mpi/torus/plugin/cmdutil"
)

// StdinSource names standard input in findings.
const StdinSource = "<stdin>"

// manifestExtensions are the files of a directory that are read.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// inputFile is one source of documents and where its results are written
// under an output directory.
type inputFile struct {
	Items []*Item
	// OutPath is relative to the output directory; its extension follows
	// the output format.
	OutPath string
	// Source names the input in messages: its file, StdinSource or the
	// cluster's MPIJob.
	Source string
	// Path is the file read, which nothing may be written over; "" when
	// the input is no file.
	Path string
}

// readStdin converts the documents of standard input.
func readStdin(r io.Reader, format outputFormat, opts Options) (inputFile, error) {
	data, err := cmdutil.ReadAll(r, "standard input")
	if err != nil {
		return inputFile{}, err
	}
	return inputFile{Items: File(StdinSource, data, opts), OutPath: "stdin" + extension(format, ".yaml"), Source: StdinSource}, nil
}

// readPath converts a file, or the manifest files (.yaml, .yml, .json) of a
// directory in name order, descending into subdirectories when recursive.
// A file that cannot be read becomes an item with an error finding: it
// fails the run, not the other files. Nothing but regular files is read: a
// symbolic link is not followed (named, it is an error; met in a
// directory, a note), and a FIFO or device is not opened.
func readPath(name string, recursive bool, format outputFormat, opts Options) ([]inputFile, error) {
	st, err := os.Lstat(name)
	if err != nil || !st.IsDir() {
		return []inputFile{readFile(name, filepath.Base(name), format, opts)}, nil
	}
	var files, skipped []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != name && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains(manifestExtensions, strings.ToLower(filepath.Ext(p))) {
			return nil
		}
		if !d.Type().IsRegular() {
			skipped = append(skipped, p)
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", name, err)
	}
	slices.Sort(files)
	out := make([]inputFile, 0, len(files)+len(skipped))
	for _, p := range skipped {
		it := &Item{Source: p, Findings: []Finding{{Level: LevelNote, Message: "skipped: not a regular file (a symbolic link, FIFO or device is never followed or opened); name the file it stands for"}}}
		out = append(out, inputFile{Items: []*Item{it}, Source: p})
	}
	for _, f := range files {
		rel, err := filepath.Rel(name, f)
		if err != nil {
			rel = filepath.Base(f)
		}
		out = append(out, readFile(f, rel, format, opts))
	}
	return out, nil
}

func readFile(path, rel string, format outputFormat, opts Options) inputFile {
	outPath := strings.TrimSuffix(rel, filepath.Ext(rel)) + extension(format, filepath.Ext(rel))
	data, err := cmdutil.ReadRegularFile(path)
	if err != nil {
		it := &Item{Source: path, Findings: []Finding{{Level: LevelError, Message: fmt.Sprintf("reading the file: %v", err)}}}
		return inputFile{Items: []*Item{it}, OutPath: outPath, Source: path, Path: path}
	}
	return inputFile{Items: File(path, data, opts), OutPath: outPath, Source: path, Path: path}
}

// extension is the output file extension: the input's for YAML (.yaml or
// .yml), .json for JSON.
func extension(format outputFormat, in string) string {
	if format == formatJSON {
		return ".json"
	}
	if in == ".yml" {
		return in
	}
	return ".yaml"
}

// writeDir writes each input's results to its own file under dir, and
// returns how many files it wrote: inputs that produce nothing get none.
// Every result is rendered, and checked against clashes (planDir), before
// anything is written; dir is created if missing, as mkdir -p would.
func writeDir(dir string, inputs []inputFile, format outputFormat) (int, error) {
	outs, err := planDir(dir, inputs, format)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("creating the output directory: %w", err)
	}
	written, done := 0, files[writtenFile]{}
	for _, out := range outs {
		// Under the output directory nothing is written through a symbolic
		// link, and out.Path holds no ".." (names from a cluster are
		// checked where they are read).
		path := filepath.Join(dir, out.Path)
		if err := cmdutil.MkdirNoFollow(dir, filepath.Dir(path), 0o755); err != nil {
			return written, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := sameAsWritten(path, out.Source, done); err != nil {
			return written, err
		}
		f, err := cmdutil.CreateRegularFile(path, 0o644)
		if err != nil {
			return written, fmt.Errorf("writing %s: %w", path, err)
		}
		_, werr := f.Write(out.Data)
		st, serr := f.Stat()
		if err := errors.Join(werr, serr, f.Close()); err != nil {
			return written, fmt.Errorf("writing %s: %w", path, err)
		}
		written++
		done.add(st, writtenFile{path: path, source: out.Source})
	}
	return written, nil
}
