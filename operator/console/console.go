// Package console adds Torus to OpenShift's web console when the cluster
// serves the console's API: a YAML sample of an MPI TrainJob for each
// default runtime (ConsoleYAMLSample), offered when a user creates a
// TrainJob, and the plugin's download links (ConsoleCLIDownload) on the
// console's command-line tools page.
//
// The operator applies them at start rather than the OLM bundle carrying
// them: a bundle object whose API a cluster lacks fails the whole install,
// and the same bundle serves Kubernetes clusters without a console.
package console

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/pkg/version"
	"github.com/torus-mpi/torus/samples"
)

// FieldManager owns the fields the operator writes in console objects.
const FieldManager = "torus-operator-console"

// CLIDownloadName names the plugin's ConsoleCLIDownload.
const CLIDownloadName = "torus-kubectl-mpi"

var (
	yamlSampleKind  = schema.GroupVersionKind{Group: "console.openshift.io", Version: "v1", Kind: "ConsoleYAMLSample"}
	cliDownloadKind = schema.GroupVersionKind{Group: "console.openshift.io", Version: "v1", Kind: "ConsoleCLIDownload"}
)

// +kubebuilder:rbac:groups=console.openshift.io,resources=consoleyamlsamples;consoleclidownloads,verbs=create;patch

// Installer applies the console objects for a release (version.Version)
// once the manager runs (as leader), if the console's API is served.
func Installer(c client.Client, mapper meta.RESTMapper, release string, log logr.Logger) *startup.Applier {
	return &startup.Applier{Client: c, Mapper: mapper, Kind: yamlSampleKind, FieldManager: FieldManager,
		Objects: func() ([]*unstructured.Unstructured, error) { return Objects(release) },
		What:    "installing the console samples and downloads", Log: log}
}

// Objects are the console objects for a release: a ConsoleYAMLSample per
// sample TrainJob and the ConsoleCLIDownload.
func Objects(release string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, name := range samples.TrainJobNames() {
		data, err := samples.TrainJobManifest(name)
		if err != nil {
			return nil, err
		}
		var tj struct {
			Spec struct {
				RuntimeRef struct {
					Name string `json:"name"`
				} `json:"runtimeRef"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &tj); err != nil {
			return nil, fmt.Errorf("decoding sample TrainJob %s: %w", name, err)
		}
		title, description := sampleText(data)
		o := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "torus-" + name},
			"spec": map[string]any{
				"targetResource": map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"},
				"title":          title,
				"description":    fmt.Sprintf("%s It runs on the runtime %s, which the Torus operator installs.", description, tj.Spec.RuntimeRef.Name),
				"yaml":           string(data),
			},
		}}
		o.SetGroupVersionKind(yamlSampleKind)
		objs = append(objs, o)
	}
	objs = append(objs, cliDownload(release))
	return objs, nil
}

// sampleText is a sample's title and description from its opening comment:
// the first line without its "#".
func sampleText(data []byte) (title, description string) {
	first, _, _ := strings.Cut(string(data), "\n")
	description = strings.TrimSpace(strings.TrimPrefix(first, "#"))
	title = strings.TrimSuffix(description, ".")
	return title, description
}

// cliDownload links the plugin's archives of a release; a build without a
// release (dev) links the latest one.
func cliDownload(release string) *unstructured.Unstructured {
	base := "https://github.com/torus-mpi/torus/releases/latest"
	if strings.HasPrefix(release, "v") {
		base = fmt.Sprintf(version.ReleaseURL, release)
	}
	var links []any
	for _, p := range version.Platforms {
		href := base
		if strings.HasPrefix(release, "v") {
			href = base + "/" + p.Archive(release)
		}
		links = append(links, map[string]any{"href": href, "text": "Download kubectl-mpi for " + p.String()})
	}
	o := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": CLIDownloadName},
		"spec": map[string]any{
			"displayName": "kubectl mpi - run MPI jobs (Torus)",
			"description": "The Torus plugin for `oc` and `kubectl`: `oc mpi run`, `list`, `logs`, `describe`, `exec-rank`, `doctor`. " +
				"Unpack the archive into a directory on your PATH, or install it with krew: `kubectl krew install mpi`.",
			"links": links,
		},
	}}
	o.SetGroupVersionKind(cliDownloadKind)
	return o
}
