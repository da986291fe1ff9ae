//go:build unix

package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mpiJobYAML is an MPIJob that converts.
var mpiJobYAML = func() string {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "input", "reuse.yaml"))
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// writeDir writes under the output directory only: a symbolic link there,
// in place of a directory or a file, is refused and what it points to is
// left as it was.
func TestWriteDirFollowsNoLink(t *testing.T) {
	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, "pi.yaml")
	if err := os.WriteFile(victim, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	converted := func(t *testing.T) []inputFile {
		items := File("pi.yaml", []byte(mpiJobYAML), Options{})
		return []inputFile{{Items: items, OutPath: filepath.Join("team", "pi.yaml")}}
	}
	cases := map[string]func(t *testing.T, out string){
		"a directory that is a link": func(t *testing.T, out string) {
			if err := os.Symlink(elsewhere, filepath.Join(out, "team")); err != nil {
				t.Fatal(err)
			}
		},
		"a file that is a link": func(t *testing.T, out string) {
			if err := os.Mkdir(filepath.Join(out, "team"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(out, "team", "pi.yaml")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			plant(t, out)
			_, err := writeDir(out, converted(t), formatYAML)
			if err == nil || !strings.Contains(err.Error(), "refusing to write through it") {
				t.Errorf("writeDir = %v, want a refusal", err)
			}
			if data, _ := os.ReadFile(victim); string(data) != "mine\n" {
				t.Errorf("the file the link points to was written: %q", data)
			}
		})
	}
	t.Run("real directories are written", func(t *testing.T) {
		out := t.TempDir()
		if n, err := writeDir(out, converted(t), formatYAML); err != nil || n != 1 {
			t.Fatalf("writeDir = %d, %v", n, err)
		}
		if _, err := os.Stat(filepath.Join(out, "team", "pi.yaml")); err != nil {
			t.Error(err)
		}
	})
}

// Reading opens regular files only: a FIFO is neither opened nor waited
// on, a link is not followed; in a directory both are skipped with a note,
// the regular files beside them converted.
func TestReadPathRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(mpiJobYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "b.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "a.yaml"), filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var inputs []inputFile
	var named []inputFile
	go func() {
		defer close(done)
		inputs, _ = readPath(dir, false, formatYAML, Options{})
		named, _ = readPath(filepath.Join(dir, "b.yaml"), false, formatYAML, Options{})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reading waited on a FIFO")
	}
	got := map[string]string{}
	for _, in := range inputs {
		for _, it := range in.Items {
			msg := "converted"
			if len(it.Findings) > 0 && strings.HasPrefix(it.Findings[0].Message, "skipped") {
				msg = "skipped"
			}
			got[filepath.Base(it.Source)] = msg
		}
	}
	want := map[string]string{"a.yaml": "converted", "b.yaml": "skipped", "c.yaml": "skipped"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s (all: %v)", k, got[k], v, got)
		}
	}
	if len(named) != 1 || len(named[0].Items) != 1 || !strings.Contains(named[0].Items[0].Findings[0].Message, "not a regular file (a FIFO)") {
		t.Errorf("a FIFO named on the command line: %+v", named)
	}
}
