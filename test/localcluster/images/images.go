// Package images builds container images for the local cluster's real
// node with neither a container engine nor a registry: files laid out as
// one layer, written as a docker-archive tarball that containerd imports
// (ctr images import). go-containerregistry does the image formats.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is a file of an image's layer.
type File struct {
	// Path inside the image, absolute.
	Path string
	// Source is read for the content.
	Source string
	Mode   int64
}

// Image is one image of an archive.
type Image struct {
	// Tag names it in the node's image store, e.g. registry.torus.local/pause:1.
	Tag string
	// Layers are uncompressed tarballs (a root filesystem), bottom first;
	// Files make one more layer on top.
	Layers     []string
	Files      []File
	Env        []string
	Entrypoint []string
	// User runs the entrypoint, as uid[:gid]; empty is root.
	User string
}

// Write writes the images to out as one docker-archive.
func Write(out string, imgs ...Image) error {
	refs := map[name.Reference]v1.Image{}
	for _, im := range imgs {
		ref, err := name.NewTag(im.Tag)
		if err != nil {
			return fmt.Errorf("image tag %q: %w", im.Tag, err)
		}
		var layers []v1.Layer
		for _, l := range im.Layers {
			layer, err := tarball.LayerFromFile(l, tarball.WithCompressionLevel(gzip.BestSpeed))
			if err != nil {
				return fmt.Errorf("image %s: layer %s: %w", im.Tag, l, err)
			}
			layers = append(layers, layer)
		}
		if len(im.Files) > 0 {
			layer, err := layerOf(im.Files)
			if err != nil {
				return fmt.Errorf("image %s: %w", im.Tag, err)
			}
			layers = append(layers, layer)
		}
		img, err := mutate.AppendLayers(empty.Image, layers...)
		if err != nil {
			return err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cfg = cfg.DeepCopy()
		// The binaries and root filesystems are built for this machine.
		cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
		cfg.Config.Entrypoint = im.Entrypoint
		cfg.Config.User = im.User
		cfg.Config.Env = im.Env
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			return err
		}
		refs[ref] = img
	}
	return tarball.MultiRefWriteToFile(out, refs)
}

// layerOf packs files into an uncompressed layer, with the directories
// they need.
func layerOf(files []File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	written := map[string]bool{}
	var writeDir func(string) error
	writeDir = func(d string) error {
		if d == "/" || written[d] {
			return nil
		}
		if err := writeDir(path.Dir(d)); err != nil {
			return err
		}
		written[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755})
	}
	for _, f := range files {
		if err := writeDir(path.Dir(f.Path)); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Path[1:], Mode: f.Mode, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
