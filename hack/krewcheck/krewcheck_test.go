package krewcheck

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/krew/pkg/constants"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"
)

// released are the platforms Torus ships kubectl-mpi for.
var released = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}

// probes are os/arch pairs a krew client may run on; no two platforms of a
// manifest may match the same one.
var probes = func() []labels.Set {
	var out []labels.Set
	for _, os := range []string{"linux", "darwin", "windows", "freebsd"} {
		for _, arch := range []string{"amd64", "arm64", "386", "arm", "ppc64le", "s390x"} {
			out = append(out, labels.Set{"os": os, "arch": arch})
		}
	}
	return out
}()

var sha256Pattern = regexp.MustCompile(`^[a-f0-9]{64}$`)

// releaseDir returns the release to check: KREW_RELEASE_DIR (make release
// sets it), or a placeholder release hack/release packs for this test.
func releaseDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KREW_RELEASE_DIR"); dir != "" {
		return dir
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./hack/release", "-placeholder", "-out", dir)
	cmd.Dir = filepath.Join("..", "..")
	// This module builds outside the repository's workspace; the release
	// is built in it.
	cmd.Env = append(os.Environ(), "GOWORK=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("packing a placeholder release: %v\n%s", err, out)
	}
	return dir
}

func TestManifest(t *testing.T) {
	dir := releaseDir(t)
	file := filepath.Join(dir, "mpi.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var p index.Plugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("%s is not a krew plugin manifest: %v", file, err)
	}
	for _, err := range validate(strings.TrimSuffix(filepath.Base(file), constants.ManifestExtension), &p, dir) {
		t.Error(err)
	}
}

// validate applies krew-index's rules to a manifest whose file is named
// name+".yaml" and whose archives are in dir.
func validate(name string, p *index.Plugin, dir string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if p.APIVersion != constants.CurrentAPIVersion || p.Kind != constants.PluginKind {
		bad("apiVersion/kind %s/%s, want %s/%s", p.APIVersion, p.Kind, constants.CurrentAPIVersion, constants.PluginKind)
	}
	if p.Name != name {
		bad("metadata.name %q must equal the file name %q", p.Name, name)
	}
	if !regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`).MatchString(p.Name) {
		bad("plugin name %q must be lower-case letters, digits and dashes", p.Name)
	}
	if !strings.HasPrefix(p.Spec.Version, "v") {
		bad("version %q must start with v", p.Spec.Version)
	} else if _, err := version.ParseSemantic(p.Spec.Version); err != nil {
		bad("version %q is not semantic: %v", p.Spec.Version, err)
	}
	if p.Spec.ShortDescription == "" || strings.Contains(p.Spec.ShortDescription, "\n") {
		bad("shortDescription %q must be one non-empty line", p.Spec.ShortDescription)
	}
	if p.Spec.Description == "" || p.Spec.Homepage == "" {
		bad("description and homepage are required")
	}
	if len(p.Spec.Platforms) == 0 {
		bad("no platforms")
	}

	for i, pl := range p.Spec.Platforms {
		where := fmt.Sprintf("platform %d", i)
		if pl.Selector == nil || len(pl.Selector.MatchExpressions) > 0 || len(pl.Selector.MatchLabels) == 0 {
			bad("%s: the selector must be matchLabels only", where)
			continue
		}
		for k := range pl.Selector.MatchLabels {
			if k != "os" && k != "arch" {
				bad("%s: selector key %q; only os and arch are allowed", where, k)
			}
		}
		where = fmt.Sprintf("platform %s/%s", pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"])
		if !sha256Pattern.MatchString(pl.Sha256) {
			bad("%s: sha256 %q is not 64 lower-case hex digits", where, pl.Sha256)
		}
		u, err := url.Parse(pl.URI)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			bad("%s: uri %q must be an https URL", where, pl.URI)
			continue
		}
		if pl.Bin == "" || len(pl.Files) == 0 {
			bad("%s: bin and files are required", where)
			continue
		}
		installed, err := checkArchive(filepath.Join(dir, path.Base(u.Path)), pl)
		if err != nil {
			bad("%s: %v", where, err)
			continue
		}
		if !installed[pl.Bin] {
			bad("%s: bin %q is not installed by the files of the archive (%v)", where, pl.Bin, keys(installed))
		}
		if !installed["LICENSE"] {
			bad("%s: LICENSE is not installed from the archive", where)
		}
	}

	// Every released platform matched by exactly one entry, no probe by two.
	for _, probe := range probes {
		var matched []int
		for i, pl := range p.Spec.Platforms {
			if pl.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pl.Selector)
			if err == nil && sel.Matches(probe) {
				matched = append(matched, i)
			}
		}
		id := probe["os"] + "/" + probe["arch"]
		switch {
		case len(matched) > 1:
			bad("platforms %v overlap on %s", matched, id)
		case len(matched) == 0 && contains(released, id):
			bad("no platform for released %s", id)
		}
	}
	return errs
}

// checkArchive verifies the archive's sha256 and returns the paths krew
// would install from it: each files entry copies what its from matches
// (a glob) into its to directory.
func checkArchive(file string, pl index.Platform) (map[string]bool, error) {
	a, err := read(file)
	if err != nil {
		return nil, fmt.Errorf("the archive of %s: %w", pl.URI, err)
	}
	if a.sha256 != pl.Sha256 {
		return nil, fmt.Errorf("%s has sha256 %s, the manifest says %s", filepath.Base(file), a.sha256, pl.Sha256)
	}
	entries := a.entries
	installed := map[string]bool{}
	for _, op := range pl.Files {
		n := 0
		for name, exec := range entries {
			ok, err := path.Match(op.From, name)
			if err != nil {
				return nil, fmt.Errorf("files from %q: %w", op.From, err)
			}
			if !ok {
				continue
			}
			n++
			dest := path.Clean(path.Join(op.To, path.Base(name)))
			installed[dest] = true
			if dest == pl.Bin && !exec && !strings.HasSuffix(dest, ".exe") {
				return nil, fmt.Errorf("%s is not executable in the archive", name)
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("files from %q matches nothing in %s (%v)", op.From, filepath.Base(file), keys(entries))
		}
	}
	return installed, nil
}

type archive struct {
	sha256  string
	entries map[string]bool
}

// archives caches what read found: a real release's archives are 15 MB
// each, and the mistake table reads them again and again.
var archives = map[string]archive{}

func read(file string) (archive, error) {
	if a, ok := archives[file]; ok {
		return a, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return archive{}, err
	}
	sum := sha256.Sum256(data)
	entries, err := list(file, data)
	if err != nil {
		return archive{}, fmt.Errorf("reading %s: %w", filepath.Base(file), err)
	}
	a := archive{sha256: hex.EncodeToString(sum[:]), entries: entries}
	archives[file] = a
	return a, nil
}

// list returns an archive's regular files and whether each is executable.
func list(file string, data []byte) (map[string]bool, error) {
	out := map[string]bool{}
	switch {
	case strings.HasSuffix(file, ".zip"):
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, err
		}
		for _, f := range zr.File {
			if !f.FileInfo().IsDir() {
				out[path.Clean(f.Name)] = f.Mode()&0o111 != 0
			}
		}
	case strings.HasSuffix(file, ".tar.gz"):
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			if h.Typeflag == tar.TypeReg {
				out[path.Clean(h.Name)] = h.Mode&0o111 != 0
			}
		}
	default:
		return nil, errors.New("neither .zip nor .tar.gz")
	}
	return out, nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The rules must bite: a manifest with each mistake is refused.
func TestRulesRefuseMistakes(t *testing.T) {
	dir := releaseDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "mpi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, breakIt := range map[string]func(p *index.Plugin){
		"name differs from file": func(p *index.Plugin) { p.Name = "mpi-tools" },
		"version without v":      func(p *index.Plugin) { p.Spec.Version = strings.TrimPrefix(p.Spec.Version, "v") },
		"selector on a label": func(p *index.Plugin) {
			p.Spec.Platforms[0].Selector.MatchLabels["distro"] = "debian"
		},
		"overlapping platforms": func(p *index.Plugin) {
			delete(p.Spec.Platforms[1].Selector.MatchLabels, "arch")
		},
		"short sha256": func(p *index.Plugin) { p.Spec.Platforms[0].Sha256 = "abc" },
		"wrong sha256": func(p *index.Plugin) { p.Spec.Platforms[0].Sha256 = strings.Repeat("0", 64) },
		"bin not in archive": func(p *index.Plugin) {
			p.Spec.Platforms[0].Bin = "kubectl-mpi2"
		},
		"no LICENSE": func(p *index.Plugin) {
			p.Spec.Platforms[0].Files = p.Spec.Platforms[0].Files[:1]
		},
		"missing platform": func(p *index.Plugin) { p.Spec.Platforms = p.Spec.Platforms[1:] },
	} {
		var p index.Plugin
		if err := yaml.UnmarshalStrict(data, &p); err != nil {
			t.Fatal(err)
		}
		breakIt(&p)
		if len(validate("mpi", &p, dir)) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
