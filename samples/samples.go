// Package samples embeds the shipped sample runtimes and TrainJobs, so that
// tools and tests use the very files users apply.
package samples

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/yaml"
)

//go:embed runtimes/*.yaml trainjobs/*.yaml
var files embed.FS

// Runtime decodes the sample ClusterTrainingRuntime of that name.
func Runtime(name string) (*trainer.ClusterTrainingRuntime, error) {
	data, err := RuntimeManifest(name)
	if err != nil {
		return nil, err
	}
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.UnmarshalStrict(data, &rt); err != nil {
		return nil, fmt.Errorf("decoding sample runtime %q: %w", name, err)
	}
	return &rt, nil
}

// RuntimeManifest is the file of the sample runtime of that name.
func RuntimeManifest(name string) ([]byte, error) { return manifest("runtimes", "runtime", name) }

// RuntimeNames are the sample runtimes' names, sorted.
func RuntimeNames() []string { return names("runtimes") }

// names are the file names in a directory of samples, without extension.
func names(dir string) []string {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		panic(err) // embedded at build time
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), path.Ext(e.Name())))
	}
	sort.Strings(names)
	return names
}

// TrainJobManifest is the file of the sample TrainJob of that name.
func TrainJobManifest(name string) ([]byte, error) { return manifest("trainjobs", "TrainJob", name) }

// manifest reads a sample's file.
func manifest(dir, what, name string) ([]byte, error) {
	data, err := files.ReadFile(dir + "/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no sample %s %q: %w", what, name, err)
	}
	return data, nil
}

// TrainJobNames are the sample TrainJobs' names, sorted.
func TrainJobNames() []string { return names("trainjobs") }
