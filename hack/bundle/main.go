// Command bundle generates Torus's OLM bundle (registry+v1) in bundle/ from
// the rendered kustomize base, the hand-written CSV in
// kustomize/manifests/bases, the samples and VERSION:
//
//	go run ./hack/bundle                     # bundle/ for VERSION, image ghcr.io/torus-mpi/torus-operator:v<VERSION>
//	go run ./hack/bundle -image ghcr.io/torus-mpi/torus-operator@sha256:…
//
// The same generation runs in its test, which fails when bundle/ is stale.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/torus-mpi/torus/hack/manifests/render"
)

func main() {
	var o options
	flag.StringVar(&o.out, "out", "bundle", "bundle directory to (re)write")
	flag.StringVar(&o.version, "version", "", "operator version, semver without v (default: the VERSION file)")
	flag.StringVar(&o.image, "image", "", "operator image (default: "+imageRepo+":v<version>); a digest reference marks the bundle disconnected-ready")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	root, err := render.RepoRoot()
	if err != nil {
		return err
	}
	files, err := generate(root, o)
	if err != nil {
		return err
	}
	// Remove what an earlier run wrote, so a CRD that is gone from the
	// base is gone from the bundle too.
	for _, d := range []string{"manifests", "metadata"} {
		if err := os.RemoveAll(filepath.Join(o.out, d)); err != nil {
			return fmt.Errorf("cleaning %s: %w", o.out, err)
		}
	}
	for _, name := range sortedKeys(files) {
		path := filepath.Join(o.out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	fmt.Printf("bundle: %d files in %s\n", len(files), o.out)
	return nil
}
