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
}

// readStdin converts the documents of standard input.
func readStdin(r io.Reader, format outputFormat, opts Options) (inputFile, error) {
	data, err := cmdutil.ReadAll(r, "standard input")
	if err != nil {
		return inputFile{}, err
	}
	return inputFile{Items: File(StdinSource, data, opts), OutPath: "stdin" + extension(format, ".yaml")}, nil
}

// readPath converts a file, or the manifest files (.yaml, .yml, .json) of a
// directory in name order, descending into subdirectories when recursive.
// A file that cannot be read becomes an item with an error finding: it
// fails the run, not the other files.
func readPath(name string, recursive bool, format outputFormat, opts Options) ([]inputFile, error) {
	st, err := os.Stat(name)
	if err != nil || !st.IsDir() {
		return []inputFile{readFile(name, filepath.Base(name), format, opts)}, nil
	}
	var files []string
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
		if slices.Contains(manifestExtensions, strings.ToLower(filepath.Ext(p))) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", name, err)
	}
	slices.Sort(files)
	out := make([]inputFile, 0, len(files))
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
	data, err := cmdutil.ReadFile(path)
	if err != nil {
		it := &Item{Source: path, Findings: []Finding{{Level: LevelError, Message: fmt.Sprintf("reading the file: %v", err)}}}
		return inputFile{Items: []*Item{it}, OutPath: outPath}
	}
	return inputFile{Items: File(path, data, opts), OutPath: outPath}
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
func writeDir(dir string, inputs []inputFile, format outputFormat) (int, error) {
	written := 0
	for _, in := range inputs {
		produced := false
		for _, it := range in.Items {
			outs, err := it.Outputs()
			if err != nil {
				return written, err
			}
			produced = produced || len(outs) > 0 || it.Blank
		}
		if !produced {
			continue
		}
		path := filepath.Join(dir, in.OutPath)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return written, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		f, err := os.Create(path)
		if err != nil {
			return written, fmt.Errorf("writing %s: %w", path, err)
		}
		werr := write(f, in.Items, format)
		if err := errors.Join(werr, f.Close()); err != nil {
			return written, fmt.Errorf("writing %s: %w", path, err)
		}
		written++
	}
	return written, nil
}
