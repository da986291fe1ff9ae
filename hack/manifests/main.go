// Command manifests renders each kustomize overlay (kustomize/overlays/*)
// into one installable YAML file:
//
//	go run ./hack/manifests -out dist/manifests
//	kubectl apply --server-side -f dist/manifests/kubernetes.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/torus-mpi/torus/hack/manifests/render"
)

func main() {
	out := flag.String("out", "dist/manifests", "directory to write <overlay>.yaml into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	root, err := render.RepoRoot()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	for _, o := range render.Overlays {
		data, err := render.YAML(render.Path(root, o))
		if err != nil {
			return err
		}
		file := filepath.Join(out, o+".yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
		fmt.Printf("manifests: %s\n", file)
	}
	return nil
}
