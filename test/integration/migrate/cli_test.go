package migrate_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/torus-mpi/torus/plugin/app"
)

// These tests run kubectl mpi migrate without a cluster.

func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	cmd := app.NewCmd(genericclioptions.NewConfigFlags(false), streams)
	cmd.SetArgs(append([]string{"migrate"}, args...))
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestMigrateFlags(t *testing.T) {
	pi := filepath.Join(corpusDir(), "pi.yaml")
	cases := []struct {
		args    []string
		wantErr string
	}{
		{nil, "nothing to migrate: give manifests with -f FILE|DIR|- or read the cluster's MPIJobs with --from-cluster"},
		{[]string{"-f", pi, "-A"}, "-A/--all-namespaces selects the namespaces --from-cluster reads: add --from-cluster"},
		{[]string{"-R", "--from-cluster"}, "-R/--recursive applies to directories given with -f"},
		{[]string{"-f", pi, "--runtime-mode=share"}, `--runtime-mode="share": use reuse or generate`},
		{[]string{"-f", pi, "-o", "wide"}, `--output="wide": use yaml or json`},
		{[]string{"-f", pi, "--dry-run=server"}, "--dry-run=server checks what --apply would create: add --apply (without --apply nothing is sent to the cluster)"},
		{[]string{"-f", pi, "--dry-run=client"}, `--dry-run="client": use server (with --apply) or none`},
		{[]string{"-f", "-", "-f", "-"}, "-f - (standard input) can be given once"},
		{[]string{"pi.yaml"}, `migrate takes no arguments (got ["pi.yaml"]): give manifests with -f`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := run(t, "", tc.args...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestMigrateStdinJSON(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(corpusDir(), "tensorflow-mnist.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := run(t, string(data), "-f", "-", "-o", "json")
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, stderr)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Kind string `json:"kind"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	var kinds []string
	for _, it := range list.Items {
		kinds = append(kinds, it.Kind)
	}
	got := []any{list.Kind, kinds, strings.HasPrefix(stderr, "<stdin>:"),
		strings.Contains(stderr, "migrate: 1 MPIJobs converted (1 runtimes generated, 0 shipped runtimes used), 0 documents passed through, 0 failed")}
	want := []any{"List", []string{"TrainingRuntime", "TrainJob"}, true, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s\nstderr:\n%s", diff, stderr)
	}
}

func TestMigrateOutputDir(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	copyFile := func(src, dst string) {
		t.Helper()
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(filepath.Join(corpusDir(), "pi.yaml"), filepath.Join(in, "pi.yaml"))
	copyFile(filepath.Join(corpusDir(), "pi-intel.yaml"), filepath.Join(in, "team", "intel.yml"))
	copyFile(filepath.Join(corpusDir(), "pi-mpich.yaml"), filepath.Join(in, "team", "deep", "mpich.json.txt"))
	if err := os.WriteFile(filepath.Join(in, "team", "broken.yaml"), []byte("kind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c # kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	list := func() []string {
		var files []string
		err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(out, p)
				files = append(files, rel)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(files)
		return files
	}

	// Without -R only the top directory is read.
	if _, stderr, err := run(t, "", "-f", in, "--output-dir", out); err != nil {
		t.Fatalf("migrate: %v\n%s", err, stderr)
	}
	if diff := cmp.Diff([]string{"cm.yaml", "pi.yaml"}, list()); diff != "" {
		t.Errorf("files written without -R (-want,+got):\n%s", diff)
	}
	cm, err := os.ReadFile(filepath.Join(out, "cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c # kept\n", string(cm)); diff != "" {
		t.Errorf("pass-through file (-want,+got):\n%s", diff)
	}

	// With -R the tree is mirrored; a file that failed is not written, and
	// the run fails.
	_, stderr, err := run(t, "", "-f", in, "-R", "--output-dir", out)
	if err == nil || !strings.Contains(err.Error(), "1 documents could not be converted") {
		t.Errorf("want a failure for broken.yaml, got %v", err)
	}
	if !strings.Contains(stderr, filepath.Join(in, "team", "broken.yaml")+":1: document: error: malformed YAML") {
		t.Errorf("stderr does not locate the malformed file:\n%s", stderr)
	}
	if diff := cmp.Diff([]string{"cm.yaml", "pi.yaml", filepath.Join("team", "intel.yml")}, list()); diff != "" {
		t.Errorf("files written with -R (-want,+got):\n%s", diff)
	}
}
