package migrate

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser and converter: nothing may
// panic, every converted job must render, and every finding must have a
// known level. Seeds: the MPIJob corpus and the test inputs.
//
//	go test ./plugin/migrate/ -run '^$' -fuzz '^FuzzParse$' -fuzztime=15000x -fuzzminimizetime=200x
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(corpusDir(), "*.yaml"))
	inputs, _ := filepath.Glob(filepath.Join("testdata", "input", "*"))
	for _, s := range append(seeds, inputs...) {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{"", "---", "{", "[]", "[{}]", "kind: List\nitems: [1, {kind: MPIJob}]\n", "a: &x [*x]\n",
		"apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: x}\nspec: {mpiReplicaSpecs: {Launcher: null, Worker: {replicas: 1, template: {spec: {containers: [{}]}}}}}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mode := range RuntimeModes {
			items := File("fuzz.yaml", data, Options{RuntimeMode: mode})
			for _, it := range items {
				for _, fd := range it.Findings {
					if fd.Level < LevelNote || fd.Level > LevelError {
						t.Fatalf("finding with level %d: %v", fd.Level, fd)
					}
					_ = it.FormatFinding(fd)
				}
				if it.Converted() {
					if it.Result.TrainJob.Name == "" {
						t.Fatal("converted a job without a name")
					}
					if _, err := it.Created(); err != nil {
						t.Fatalf("Created: %v", err)
					}
				}
			}
			if err := writeYAML(io.Discard, items); err != nil {
				t.Fatalf("WriteYAML: %v", err)
			}
			if err := writeJSON(io.Discard, items); err != nil {
				t.Fatalf("WriteJSON: %v", err)
			}
		}
	})
}
