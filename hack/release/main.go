// Command release cross-compiles kubectl-mpi for every platform of the krew
// manifest, packs each binary with LICENSE into an archive (tar.gz; zip
// for Windows), and fills krew/mpi.yaml with the version, each archive's
// download URI and its sha256:
//
//	go run ./hack/release -out dist/release
//
// The archives are reproducible: fixed timestamps and modes, sorted entries.
// -placeholder packs a small stand-in instead of compiling, so that tests
// can check packing and the manifest without five cross-compilations.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/torus-mpi/torus/hack/manifests/render"
	torusversion "github.com/torus-mpi/torus/pkg/version"
)

// Platforms are the os/arch pairs released; krew/mpi.yaml has one entry each.
var Platforms = torusversion.Platforms

// Platform is a GOOS/GOARCH pair.
type Platform = torusversion.Platform

// epoch is every archive entry's timestamp, so that the same sources give
// the same archives and sha256.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type options struct {
	out         string
	version     string
	baseURL     string
	placeholder bool
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "dist/release", "directory for the archives and mpi.yaml")
	flag.StringVar(&o.version, "version", "", "release version without v (default: the VERSION file)")
	flag.StringVar(&o.baseURL, "base-url", fmt.Sprintf(torusversion.ReleaseURL, "{{ .Version }}"),
		"where the archives are published; {{ .Version }} is v<version>")
	flag.BoolVar(&o.placeholder, "placeholder", false, "pack a small stand-in executable instead of compiling (tests only)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	root, err := render.RepoRoot()
	if err != nil {
		return err
	}
	if o.version == "" {
		if o.version, err = render.Version(root); err != nil {
			return err
		}
	}
	version := "v" + strings.TrimPrefix(o.version, "v")
	base, err := expand(o.baseURL, version)
	if err != nil {
		return err
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return fmt.Errorf("reading LICENSE, which every archive carries: %w", err)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.out, err)
	}
	build, err := os.MkdirTemp("", "kubectl-mpi-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(build)

	sums := map[Platform]string{}
	for _, p := range Platforms {
		bin := filepath.Join(build, p.OS+"-"+p.Arch, p.Binary())
		if o.placeholder {
			err = writePlaceholder(bin, p)
		} else {
			err = compile(root, bin, p, version)
		}
		if err != nil {
			return err
		}
		exe, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		data, err := pack(p, exe, license)
		if err != nil {
			return fmt.Errorf("packing %s: %w", p, err)
		}
		path := filepath.Join(o.out, p.Archive(version))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		sums[p] = hex.EncodeToString(sum[:])
		fmt.Printf("release: %s  %s\n", sums[p], path)
	}

	manifest, err := fill(filepath.Join(root, "krew", "mpi.yaml"), version, base, sums)
	if err != nil {
		return err
	}
	path := filepath.Join(o.out, "mpi.yaml")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return err
	}
	fmt.Printf("release: krew manifest %s\n", path)
	return nil
}

func compile(root, out string, p Platform, version string) error {
	fmt.Printf("release: building kubectl-mpi for %s\n", p)
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/torus-mpi/torus/pkg/version.Version="+version,
		"-o", out, "./plugin/cmd/kubectl-mpi")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building kubectl-mpi for %s: %w", p, err)
	}
	return nil
}

func writePlaceholder(out string, p Platform) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, []byte("#!/bin/sh\necho 'kubectl-mpi placeholder for "+p.String()+"'\n"), 0o755)
}

// pack makes the archive: the executable (mode 0755) and LICENSE (0644) at
// its root, which krew/mpi.yaml's files entries copy.
func pack(p Platform, exe, license []byte) ([]byte, error) {
	entries := []struct {
		name string
		mode int64
		data []byte
	}{{"LICENSE", 0o644, license}, {p.Binary(), 0o755, exe}}
	var buf bytes.Buffer
	if p.OS == "windows" {
		zw := zip.NewWriter(&buf)
		for _, e := range entries {
			h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: epoch}
			h.SetMode(os.FileMode(e.mode))
			w, err := zw.CreateHeader(h)
			if err != nil {
				return nil, err
			}
			if _, err := w.Write(e.data); err != nil {
				return nil, err
			}
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	gz.ModTime = epoch
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, bytes.NewReader(e.data)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func expand(text, version string) (string, error) {
	t, err := template.New("url").Option("missingkey=error").Parse(text)
	if err != nil {
		return "", fmt.Errorf("parsing %q: %w", text, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, map[string]string{"Version": version}); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "/"), nil
}

// fill executes the krew manifest template: .Version, and uri and sha256
// of an os and arch. A platform in the template that is not released, or
// a released one the template lacks, is an error.
func fill(path, version, base string, sums map[Platform]string) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the krew template: %w", err)
	}
	used := map[Platform]bool{}
	lookup := func(goos, arch string) (Platform, error) {
		p := Platform{OS: goos, Arch: arch}
		if _, ok := sums[p]; !ok {
			return p, fmt.Errorf("%s names platform %s, which is not released", path, p)
		}
		used[p] = true
		return p, nil
	}
	t, err := template.New(filepath.Base(path)).Option("missingkey=error").Funcs(template.FuncMap{
		"uri": func(goos, arch string) (string, error) {
			p, err := lookup(goos, arch)
			return base + "/" + p.Archive(version), err
		},
		"sha256": func(goos, arch string) (string, error) {
			p, err := lookup(goos, arch)
			return sums[p], err
		},
	}).Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, map[string]string{"Version": version}); err != nil {
		return nil, fmt.Errorf("filling %s: %w", path, err)
	}
	// The template's opening comment is about the template; the filled
	// manifest goes to krew-index without it.
	out := b.Bytes()
	for bytes.HasPrefix(out, []byte("#")) {
		_, out, _ = bytes.Cut(out, []byte("\n"))
	}
	for p := range sums {
		if !used[p] {
			return nil, fmt.Errorf("%s has no entry for released platform %s", path, p)
		}
	}
	return out, nil
}
