// Package repo gives the hack/ programs what they need from the
// repository: its root, where a pinned module is unpacked, and the objects
// of a manifest file.
package repo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Root is the repository's top directory: the nearest one above the
// working directory that holds go.work (each of its modules has a go.mod).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the repository: no go.work found above the working directory")
		}
		dir = parent
	}
}

// ModuleDir is where a module of the build list of the module in dir (""
// for the working directory's workspace) is unpacked; CRDs and stages ship
// there. A module in dir is taken alone: the pinned helper modules are not
// part of the workspace.
func ModuleDir(module, dir string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = dir
	if dir != "" {
		cmd.Env = append(os.Environ(), "GOWORK=off")
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ReadObjects decodes every document of a YAML or JSON file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// ReadCRDs reads the CustomResourceDefinitions of manifest files, each path
// a YAML file or a directory whose *.yaml files are read; other kinds (a
// kustomization.yaml) are skipped.
func ReadCRDs(paths ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		files := []string{p}
		if !strings.HasSuffix(p, ".yaml") {
			var err error
			if files, err = filepath.Glob(filepath.Join(p, "*.yaml")); err != nil {
				return nil, err
			}
		}
		for _, f := range files {
			objs, err := ReadObjects(f)
			if err != nil {
				return nil, err
			}
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					out = append(out, o)
				}
			}
		}
	}
	return out, nil
}
