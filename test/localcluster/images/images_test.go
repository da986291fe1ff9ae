package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestWriteReadsBackAsTheImagesAskedFor(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tiny")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "images.tar")
	err := Write(out,
		Image{Tag: "registry.torus.local/pause:1", Files: []File{{Path: "/pause", Source: bin, Mode: 0o755}}, Entrypoint: []string{"/pause"}},
		Image{Tag: "registry.torus.local/tiny:1", Files: []File{{Path: "/usr/bin/tiny", Source: bin, Mode: 0o755}}, Entrypoint: []string{"/usr/bin/tiny"}, User: "1000:1000"},
	)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		tag            string
		wantEntrypoint []string
		wantUser       string
		wantFiles      []string
	}{
		"pause": {tag: "registry.torus.local/pause:1", wantEntrypoint: []string{"/pause"}, wantFiles: []string{"pause"}},
		"tiny":  {tag: "registry.torus.local/tiny:1", wantEntrypoint: []string{"/usr/bin/tiny"}, wantUser: "1000:1000", wantFiles: []string{"usr/", "usr/bin/", "usr/bin/tiny"}},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			tag, err := name.NewTag(tc.tag)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(out, &tag)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantEntrypoint, cfg.Config.Entrypoint); diff != "" {
				t.Errorf("entrypoint (-want,+got):\n%s", diff)
			}
			if cfg.Config.User != tc.wantUser || cfg.OS != "linux" || cfg.Architecture != "amd64" {
				t.Errorf("user, os, arch = %q %q %q", cfg.Config.User, cfg.OS, cfg.Architecture)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers = %d (%v), want 1", len(layers), err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var got []string
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, h.Name)
			}
			if diff := cmp.Diff(tc.wantFiles, got); diff != "" {
				t.Errorf("layer files (-want,+got):\n%s", diff)
			}
		})
	}
}
