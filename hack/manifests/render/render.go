// Package render builds Torus's kustomize tree (kustomize/) with the
// kustomize library, as `kubectl kustomize` would, so that `make manifests`,
// the bundle generator and the tests all see the very same objects.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Overlays are the install flavours Torus ships, under kustomize/overlays.
var Overlays = []string{"kubernetes", "openshift"}

// Base is the overlay-free kustomization the OLM bundle is made from.
const Base = "base"

// Path is the directory of an overlay name, or of the base.
func Path(repoRoot, name string) string {
	if name == Base {
		return filepath.Join(repoRoot, "kustomize", Base)
	}
	return filepath.Join(repoRoot, "kustomize", "overlays", name)
}

// YAML builds the kustomization at dir into one multi-document YAML stream,
// ordered as kubectl orders it (namespaces and CRDs first).
//
// The generated files (kustomize/crd, kustomize/rbac, kustomize/webhook) sit
// beside the base rather than under it, because make generate owns those
// directories; building therefore lifts kustomize's root-only load
// restriction, as `kubectl kustomize --load-restrictor=LoadRestrictionsNone`
// does.
func YAML(dir string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", dir, err)
	}
	return out, nil
}

// Objects builds the kustomization at dir into objects.
func Objects(dir string) ([]*unstructured.Unstructured, error) {
	data, err := YAML(dir)
	if err != nil {
		return nil, err
	}
	return Decode(data)
}

// Decode splits a multi-document YAML (or JSON) stream into objects, with
// whole numbers as int64 as the API machinery expects.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding YAML: %w", err)
		}
		var m map[string]any
		if err := utiljson.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("decoding YAML: %w", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// DecodeFile reads every object of a YAML file.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Version is the release in the repository's VERSION file, without a "v".
func Version(repoRoot string) (string, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("reading the release version: %w", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(data)), "v")
	if v == "" {
		return "", fmt.Errorf("%s is empty", filepath.Join(repoRoot, "VERSION"))
	}
	return v, nil
}

// RepoRoot finds the repository root: the nearest directory above the
// working directory that holds go.mod and kustomize/.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "kustomize", "base", "kustomization.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no kustomize/base/kustomization.yaml above the working directory: run from inside the repository")
		}
		dir = parent
	}
}
