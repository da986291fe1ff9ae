//go:build unix

package migrate

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torus-mpi/torus/plugin/cmdutil"
)

// reuseMPIJob is an MPIJob that converts, named pi-reuse.
var reuseMPIJob = func() string {
	data, err := os.ReadFile(filepath.Join("testdata", "input", "reuse.yaml"))
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// namedMPIJob is an MPIJob named name that converts into a TrainJob of
// that name.
func namedMPIJob(name string) string {
	return strings.Replace(reuseMPIJob, "name: pi-reuse", "name: "+name, 1)
}

// snapshot is every entry under root: a file's content, a link's target,
// "dir" for a directory.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			got[rel] = "link to " + target
			return err
		case d.IsDir():
			got[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			got[rel] = string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// kubectl mpi migrate --output-dir refuses, before it writes anything, to
// write two inputs' results to one file or any result over an input,
// naming the inputs and what to do; creates a missing output directory;
// and counts what it wrote. Paths are relative to a fresh directory.
func TestOutputDir(t *testing.T) {
	cases := map[string]struct {
		// files are written before the run: path -> the MPIJob's name, or
		// "" for an empty file.
		files map[string]string
		// prepare adds what files cannot say (links).
		prepare   func(t *testing.T)
		filenames []string
		recursive bool
		format    outputFormat
		// stdin is the name of an MPIJob on standard input.
		stdin     string
		outputDir string
		// wantErr are in the error; with none, the run succeeds.
		wantErr  []string
		wantCode int
		// wantStderr is in the report ("wrote N files"), or, with
		// "-", not a line of it begins "wrote".
		wantStderr string
		// wantOut maps each file under outputDir after the run to the
		// TrainJob it holds. Nil with wantErr: nothing changed at all.
		wantOut map[string]string
	}{
		"two files of one name in two directories": {
			files:     map[string]string{"a/job.yaml": "pi-a", "b/job.yaml": "pi-b"},
			filenames: []string{"a/job.yaml", "b/job.yaml"},
			outputDir: "out",
			wantErr: []string{
				"--output-dir out: nothing was written",
				"a/job.yaml and b/job.yaml would both be written to out/job.yaml, the second replacing the first",
				"Inputs whose results share a file name need an --output-dir each (a run per input), or names that differ.",
			},
			wantCode: cmdutil.ExitUsage,
		},
		"two directories holding one name, recursively": {
			files:     map[string]string{"a/team/pi.yaml": "pi-a", "b/team/pi.yaml": "pi-b", "b/other.yaml": "other"},
			filenames: []string{"a", "b"},
			recursive: true,
			outputDir: "out",
			wantErr:   []string{"a/team/pi.yaml and b/team/pi.yaml would both be written to out/team/pi.yaml"},
			wantCode:  cmdutil.ExitUsage,
		},
		"three inputs for one file": {
			files:     map[string]string{"x/pi.yaml": "pi-x", "y/pi.yaml": "pi-y", "z/pi.yaml": "pi-z"},
			filenames: []string{"x/pi.yaml", "y/pi.yaml", "z/pi.yaml"},
			outputDir: "out",
			wantErr:   []string{"x/pi.yaml, y/pi.yaml and z/pi.yaml would all be written to out/pi.yaml, each replacing the one before"},
			wantCode:  cmdutil.ExitUsage,
		},
		"a.yaml and a.yml both become a.json": {
			files:     map[string]string{"in/a.yaml": "pi-a", "in/a.yml": "pi-b"},
			filenames: []string{"in"},
			format:    formatJSON,
			outputDir: "out",
			wantErr:   []string{"in/a.yaml and in/a.yml would both be written to out/a.json"},
			wantCode:  cmdutil.ExitUsage,
		},
		"standard input and a file named stdin.yaml": {
			files:     map[string]string{"in/stdin.yaml": "pi-file"},
			stdin:     "pi-stdin",
			filenames: []string{"-", "in/stdin.yaml"},
			outputDir: "out",
			wantErr:   []string{"<stdin> and in/stdin.yaml would both be written to out/stdin.yaml"},
			wantCode:  cmdutil.ExitUsage,
		},
		"the input directory as the output directory": {
			files:     map[string]string{"in/pi.yaml": "pi", "in/cm.yaml": ""},
			filenames: []string{"in"},
			outputDir: "in",
			wantErr: []string{
				"in/pi.yaml would be written over with its own results",
				"Choose an --output-dir that holds none of the inputs (one that does not exist yet is created).",
			},
			wantCode: cmdutil.ExitUsage,
		},
		"the output directory, a link to the input directory": {
			files:     map[string]string{"in/pi.yaml": "pi"},
			prepare:   func(t *testing.T) { symlink(t, "in", "out") },
			filenames: []string{"in"},
			outputDir: "out",
			wantErr:   []string{"in/pi.yaml would be written over with its own results (as out/pi.yaml)"},
			wantCode:  cmdutil.ExitUsage,
		},
		"an output directory inside the input tree, run again": {
			files:     map[string]string{"data/pi.yaml": "pi", "data/sub/pi.yaml": "pi-before"},
			filenames: []string{"data"},
			recursive: true,
			outputDir: "data/sub",
			wantErr:   []string{"data/sub/pi.yaml would be written over with the results of data/pi.yaml"},
			wantCode:  cmdutil.ExitUsage,
		},
		"a hard link to an input in the output directory": {
			files: map[string]string{"in/pi.yaml": "pi"},
			prepare: func(t *testing.T) {
				mkdir(t, "out")
				if err := os.Link("in/pi.yaml", "out/pi.yaml"); err != nil {
					t.Fatal(err)
				}
			},
			filenames: []string{"in"},
			outputDir: "out",
			wantErr:   []string{"in/pi.yaml would be written over with its own results (as out/pi.yaml)"},
			wantCode:  cmdutil.ExitUsage,
		},
		"a missing output directory is created": {
			files:      map[string]string{"in/a.yaml": "pi-a", "in/b.yaml": "pi-b"},
			filenames:  []string{"in"},
			outputDir:  "new/deeper",
			wantStderr: "wrote 2 files to new/deeper\n",
			wantOut:    map[string]string{"a.yaml": "pi-a", "b.yaml": "pi-b"},
		},
		"distinct file names from two directories": {
			files:      map[string]string{"a/job.yaml": "pi-a", "b/other.yaml": "pi-b"},
			filenames:  []string{"a/job.yaml", "b/other.yaml"},
			outputDir:  "out",
			wantStderr: "wrote 2 files to out\n",
			wantOut:    map[string]string{"job.yaml": "pi-a", "other.yaml": "pi-b"},
		},
		"an input that produces nothing gets no file": {
			files:      map[string]string{"in/a.yaml": "pi-a", "in/empty.yaml": ""},
			filenames:  []string{"in"},
			outputDir:  "out",
			wantStderr: "wrote 1 file to out\n",
			wantOut:    map[string]string{"a.yaml": "pi-a"},
		},
		// Two names of one file (a hard link left in the output directory;
		// the same on a file system that ignores case) come to light only
		// once the first is written: the second is refused, the count
		// says what was written.
		"two output names of one file": {
			files: map[string]string{"in/a.yaml": "pi-a", "in/b.yaml": "pi-b", "out/a.yaml": ""},
			prepare: func(t *testing.T) {
				if err := os.Link("out/a.yaml", "out/b.yaml"); err != nil {
					t.Fatal(err)
				}
			},
			filenames:  []string{"in"},
			outputDir:  "out",
			wantErr:    []string{"out/b.yaml is the file out/a.yaml, just written with the results of in/a.yaml", "the results of in/b.yaml would replace them"},
			wantCode:   cmdutil.ExitFailure,
			wantStderr: "wrote 1 file to out\n",
			wantOut:    map[string]string{"a.yaml": "pi-a", "b.yaml": "pi-a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			t.Chdir(root)
			for p, job := range tc.files {
				mkdir(t, filepath.Dir(p))
				content := ""
				if job != "" {
					content = namedMPIJob(job)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.prepare != nil {
				tc.prepare(t)
			}
			before := snapshot(t, root)
			format := tc.format
			if format == "" {
				format = formatYAML
			}
			stdin := ""
			if tc.stdin != "" {
				stdin = namedMPIJob(tc.stdin)
			}
			var stdout, stderr bytes.Buffer
			r := &migration{Filenames: tc.filenames, Recursive: tc.recursive, Format: format, OutputDir: tc.outputDir,
				In: strings.NewReader(stdin), Out: &stdout, ErrOut: &stderr}
			err := r.Do(context.Background())

			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("Do = %v\n%s", err, stderr.String())
			}
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Do = %v, want an error saying %q", err, want)
				}
			}
			if err != nil && cmdutil.Code(err) != tc.wantCode {
				t.Errorf("exit code %d, want %d", cmdutil.Code(err), tc.wantCode)
			}
			if tc.wantStderr != "" && !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("the report lacks %q:\n%s", tc.wantStderr, stderr.String())
			}
			after := snapshot(t, root)
			if tc.wantOut == nil {
				if strings.Contains(stderr.String(), "\nwrote ") || strings.HasPrefix(stderr.String(), "wrote ") {
					t.Errorf("a refusal reports writing:\n%s", stderr.String())
				}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("the refused run changed files (-before,+after):\n%s", diff)
				}
				return
			}
			// The inputs are as they were; the output directory holds the
			// TrainJobs wanted.
			for p, content := range before {
				if !strings.HasPrefix(p, tc.outputDir+string(filepath.Separator)) && after[p] != content {
					t.Errorf("input %s changed", p)
				}
			}
			got := map[string]string{}
			for p, content := range after {
				rel, err := filepath.Rel(tc.outputDir, p)
				if err != nil || strings.HasPrefix(rel, "..") || content == "dir" || rel == "." {
					continue
				}
				got[rel] = "?"
				for _, job := range tc.wantOut {
					if strings.Contains(content, "kind: TrainJob\nmetadata:\n  name: "+job+"\n") {
						got[rel] = job
					}
				}
			}
			if diff := cmp.Diff(tc.wantOut, got); diff != "" {
				t.Errorf("the output directory's TrainJobs (-want,+got):\n%s", diff)
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}
