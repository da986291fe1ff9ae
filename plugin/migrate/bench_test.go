package migrate

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// benchFiles is the size of the directory BenchmarkMigrateDirectory converts.
const benchFiles = 1000

// BenchmarkMigrateDirectory converts a directory of 1,000 MPIJob manifests
// (the corpus renamed, and random jobs) the way kubectl mpi migrate -f DIR
// does: read every file, parse, convert, render YAML. It reports
// manifests/s.
func BenchmarkMigrateDirectory(b *testing.B) {
	dir := b.TempDir()
	var corpus [][]byte
	for _, f := range corpusFiles(b) {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		corpus = append(corpus, data)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range benchFiles {
		var data []byte
		if i%2 == 0 {
			src := string(corpus[i/2%len(corpus)])
			data = []byte(strings.Replace(src, "\n  name: ", fmt.Sprintf("\n  name: job%d-", i), 1))
		} else {
			var err error
			if data, err = yaml.Marshal(randomMPIJob(r)); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("job-%04d.yaml", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				b.Fatal(err)
			}
			items := File(e.Name(), data, Options{})
			for _, it := range items {
				if it.Failed() {
					b.Fatalf("%s: %v", e.Name(), it.Findings)
				}
			}
			if err := writeYAML(io.Discard, items); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "manifests/s")
}
