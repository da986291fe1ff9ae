package main

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/test/localcluster/images"
)

// The real nodes' images: built here from Debian's packages and static
// binaries, never pulled, and imported into each node's containerd.

// nodeArchives builds (or takes from the cache) every image archive the
// real nodes import.
func (c *cluster) nodeArchives(ctx context.Context) ([]string, error) {
	archive, err := c.buildImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("building the node's images: %w", err)
	}
	archives := []string{archive}
	if c.operatorImage != "" {
		a, err := c.operatorImageArchive()
		switch {
		case err != nil && c.operatorImageDefault:
			c.logf("no operator image on the nodes: %v", err)
		case err != nil:
			return nil, fmt.Errorf("the operator image: %w", err)
		default:
			archives = append(archives, a)
		}
	}
	launch, err := c.launchAgent()
	if err != nil {
		return nil, err
	}
	for _, img := range []struct {
		suite, tag string
		files      []images.File
	}{
		{"bookworm", mpiImage, nil}, {"trixie", mpiTrixieImage, nil},
		// The agent's image also holds the agent, for jobs that run it
		// from there (api.AnnotationLaunchAgentPath).
		{"bookworm-nossh", mpiImageNoSSH, []images.File{{Path: mpiImageAgentPath, Source: launch, Mode: 0o755}}},
		{"trixie-nossh", mpiTrixieImageNoSSH, nil},
	} {
		a, err := c.mpiImageArchive(ctx, img.suite, img.tag, img.files...)
		if err != nil {
			return nil, fmt.Errorf("the MPI image %s: %w", img.tag, err)
		}
		archives = append(archives, a)
	}
	return archives, nil
}

// buildImages builds the tiny static binary and writes the pause and tiny
// images to one archive.
func (c *cluster) buildImages(ctx context.Context) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "images"), 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(c.dir, "images", "tiny")
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", bin, "./test/localcluster/images/tiny")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building test/localcluster/images/tiny: %w: %s", err, out)
	}
	archive := filepath.Join(c.dir, "images", "images.tar")
	return archive, images.Write(archive,
		images.Image{Tag: pauseImage, Files: []images.File{{Path: "/pause", Source: bin, Mode: 0o755}}, Entrypoint: []string{"/pause"}},
		images.Image{Tag: tinyImage, Files: []images.File{{Path: "/usr/bin/tiny", Source: bin, Mode: 0o755}}, Entrypoint: []string{"/usr/bin/tiny"}},
	)
}

// operatorImageArchive wraps the operator binary as the image the bundle's
// CSV deploys (its tag read from the CSV), the way the release image holds
// it: the static binary and the launch agent's, run as a non-root user. Cached outside the
// clone, keyed by the binary and the tag.
func (c *cluster) operatorImageArchive() (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	tag, err := csvImage(filepath.Join(root, "bundle", "manifests", "torus-operator.clusterserviceversion.yaml"))
	if err != nil {
		return "", err
	}
	if err := checkStatic(c.operatorImage); err != nil {
		return "", err
	}
	bin, err := os.ReadFile(c.operatorImage)
	if err != nil {
		return "", err
	}
	// The launch agent beside the operator, as the release image holds it.
	launch, err := c.launchAgent()
	if err != nil {
		return "", err
	}
	launchBin, err := os.ReadFile(launch)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(slices.Concat(bin, launchBin, []byte(tag)))
	cache, err := imageCache()
	if err != nil {
		return "", err
	}
	archive := filepath.Join(cache, "operator-"+hex.EncodeToString(sum[:8])+".tar")
	if _, err := os.Stat(archive); err == nil {
		return archive, nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", archive, os.Getpid())
	defer os.Remove(tmp)
	if err := images.Write(tmp, images.Image{Tag: tag,
		Files: []images.File{
			{Path: "/torus-operator", Source: c.operatorImage, Mode: 0o755},
			{Path: mpi.LaunchImagePath, Source: launch, Mode: 0o755},
			{Path: "/licenses/LICENSE", Source: filepath.Join(root, "LICENSE"), Mode: 0o644},
		},
		Entrypoint: []string{"/torus-operator"}, User: "65532:65532"}); err != nil {
		return "", err
	}
	// One operator image at a time: earlier builds go.
	old, _ := filepath.Glob(filepath.Join(cache, "operator-*.tar"))
	for _, o := range old {
		_ = os.Remove(o)
	}
	return archive, os.Rename(tmp, archive)
}

// launchAgent builds torus-launch from this tree, static, once per run.
func (c *cluster) launchAgent() (string, error) {
	if c.launchBinary != "" {
		return c.launchBinary, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "images"), 0o755); err != nil {
		return "", err
	}
	launch := filepath.Join(c.dir, "images", mpi.LaunchBinary)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", launch, "./launch/cmd/torus-launch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building launch/cmd/torus-launch: %w: %s", err, out)
	}
	c.launchBinary = launch
	return launch, nil
}

// checkStatic refuses a binary that needs a dynamic loader: the image
// holds nothing else, and its container would fail with "exec: no such
// file or directory".
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically; the operator image holds only the binary: build it with CGO_ENABLED=0 (make build does)", path)
		}
	}
	return nil
}

// csvImage reads the image a CSV's first deployment runs.
func csvImage(path string) (string, error) {
	objs, err := repo.ReadObjects(path)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		deployments, _, _ := unstructured.NestedSlice(o.Object, "spec", "install", "spec", "deployments")
		for _, d := range deployments {
			containers, _, _ := unstructured.NestedSlice(d.(map[string]any), "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				if image, _ := ctr.(map[string]any)["image"].(string); image != "" {
					return image, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s names no deployment image", path)
}

// imageCache is where images built here are kept between clusters, as
// test/localcluster/images/mpi/build.sh keeps them ($XDG_CACHE_HOME, else ~/.cache).
func imageCache() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "torus", "images")
	return dir, os.MkdirAll(dir, 0o755)
}

// mpiImageArchive returns an MPI image as a docker archive, built from
// the root filesystem test/localcluster/images/mpi/build.sh makes of a Debian suite;
// both are cached outside the clone, keyed by what they are built from.
func (c *cluster) mpiImageArchive(ctx context.Context, suite, tag string, files ...images.File) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "test", "localcluster", "images", "mpi", "build.sh"), suite)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("test/localcluster/images/mpi/build.sh: %w", err)
	}
	layers := strings.Fields(string(out))
	if len(layers) == 0 {
		return "", fmt.Errorf("test/localcluster/images/mpi/build.sh %s named no layer", suite)
	}
	img := images.Image{Tag: tag, Layers: layers, Files: files, User: "1000:1000",
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/mpiuser"}}
	// Keyed by the layers' recipes (their names), by this configuration
	// and by the files on top.
	h := sha256.New()
	fmt.Fprint(h, img.Tag, img.User, img.Env, layers)
	for _, f := range files {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return "", err
		}
		fmt.Fprint(h, f.Path, f.Mode)
		h.Write(data)
	}
	// Named for the suite and the key of its top layer's recipe
	// (mpi-rootfs-SUITE-KEY.tar or mpi-layer-SUITE-KEY.tar).
	top := strings.TrimSuffix(filepath.Base(layers[len(layers)-1]), ".tar")
	key := top[strings.LastIndex(top, "-")+1:]
	prefix := filepath.Join(filepath.Dir(layers[0]), "mpi-image-"+suite+"-"+key) + "-"
	archive := prefix + hex.EncodeToString(h.Sum(nil)[:4]) + ".tar"
	if _, err := os.Stat(archive); err == nil {
		return archive, nil
	}
	// Files on top change with the tree: the archives of earlier ones go.
	if len(files) > 0 {
		old, _ := filepath.Glob(prefix + "*.tar")
		for _, o := range old {
			_ = os.Remove(o)
		}
	}
	start := time.Now()
	tmp := fmt.Sprintf("%s.%d.tmp", archive, os.Getpid())
	defer os.Remove(tmp)
	if err := images.Write(tmp, img); err != nil {
		return "", err
	}
	c.logf("wrote the MPI image in %.1fs", time.Since(start).Seconds())
	return archive, os.Rename(tmp, archive)
}

// writeMPIImage writes an MPI image of the local cluster's as a docker
// archive at out, under the name a registry will serve it by: the archive
// the real nodes import, but for its tag. skopeo, podman load or crane
// push it.
func (c *cluster) writeMPIImage(ctx context.Context, suite, tag, out string) error {
	if tag == "" || out == "" {
		return errors.New("image: give -tag, the name a registry will serve the image by, and -o, the archive to write")
	}
	if _, err := name.NewTag(tag); err != nil {
		return fmt.Errorf("image: -tag %q: %w", tag, err)
	}
	archive, err := c.mpiImageArchive(ctx, suite, tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	src, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("image: writing %s: %w", out, err)
	}
	if err := dst.Close(); err != nil {
		return err
	}
	c.logf("wrote %s (%s) to %s", tag, suite, out)
	return nil
}
