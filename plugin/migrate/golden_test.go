package migrate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torus-mpi/torus/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// corpusDir holds real MPIJobs published by mpi-operator, shared by the
// project (not copied here); MIGRATE_CORPUS points elsewhere.
func corpusDir() string {
	if d := os.Getenv("MIGRATE_CORPUS"); d != "" {
		return d
	}
	return corpus.Dir("mpijob-v2beta1")
}

func corpusFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no MPIJob corpus in %s (set MIGRATE_CORPUS)", corpusDir())
	}
	return files
}

func inputFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "input", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestGolden pins the output and the report of every corpus manifest and
// test input. Run with -update to rewrite them after a deliberate change.
func TestGolden(t *testing.T) {
	type goldenCase struct {
		name   string
		input  string
		opts   Options
		format outputFormat
	}
	var cases []goldenCase
	for _, f := range corpusFiles(t) {
		cases = append(cases, goldenCase{name: "corpus/" + strings.TrimSuffix(filepath.Base(f), ".yaml"), input: f, format: formatYAML})
	}
	for _, f := range inputFiles(t) {
		cases = append(cases, goldenCase{name: "input/" + strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), input: f, format: formatYAML})
	}
	cases = append(cases,
		goldenCase{name: "generate/reuse", input: filepath.Join("testdata", "input", "reuse.yaml"), opts: Options{RuntimeMode: RuntimeModeGenerate}, format: formatYAML},
		goldenCase{name: "json/kitchen-sink", input: filepath.Join("testdata", "input", "kitchen-sink.yaml"), format: formatJSON},
		goldenCase{name: "json/multi", input: filepath.Join("testdata", "input", "multi.yaml"), format: formatJSON},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(tc.input)
			if err != nil {
				t.Fatal(err)
			}
			items := File(filepath.Base(tc.input), data, tc.opts)
			var out bytes.Buffer
			if err := write(&out, items, tc.format); err != nil {
				t.Fatalf("Write: %v", err)
			}
			var report strings.Builder
			for _, it := range items {
				for _, f := range it.Findings {
					report.WriteString(it.FormatFinding(f) + "\n")
				}
			}
			checkGolden(t, filepath.Join("testdata", "golden", tc.name+"."+string(tc.format)), out.String())
			checkGolden(t, filepath.Join("testdata", "golden", tc.name+".findings"), report.String())
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./plugin/migrate/ -run TestGolden -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want,+got); run with -update if the change is deliberate:\n%s", path, diff)
	}
}
