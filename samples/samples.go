// Package samples embeds the shipped sample runtimes and TrainJobs, so that
// tools and tests use the very files users apply.
package samples

import (
	"embed"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/yaml"
)

//go:embed runtimes/*.yaml trainjobs/*.yaml
var files embed.FS

// Runtime decodes the sample ClusterTrainingRuntime of that name.
func Runtime(name string) (*trainer.ClusterTrainingRuntime, error) {
	data, err := files.ReadFile("runtimes/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no sample runtime %q: %w", name, err)
	}
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.UnmarshalStrict(data, &rt); err != nil {
		return nil, fmt.Errorf("decoding sample runtime %q: %w", name, err)
	}
	return &rt, nil
}
