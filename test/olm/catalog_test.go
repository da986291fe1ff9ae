package olm

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/test/framework"
)

const (
	torusPackage  = "torus-operator"
	brokenPackage = "torus-operator-broken"
	jobsetPackage = "jobset-operator"
	jobsetCSV     = "jobset-operator.v0.12.0"
)

// buildCatalog writes a file-based catalog under dir with three packages,
// each rendered from a bundle directory by opm (so the CSV and CRDs travel
// inline as olm.bundle.object, and no image is ever pulled):
//
//   - torus-operator: bundle/ as make bundle wrote it;
//   - jobset-operator: a stand-in owning JobSet's CRD from the pinned module,
//     so that OLM has a provider for Torus's required JobSet dependency;
//   - torus-operator-broken: bundle/ with a Deployment the API server refuses.
//
// It then checks the catalog with opm validate and returns its CSV names.
func buildCatalog(dir string) (torusCSV, brokenCSV string) {
	GinkgoHelper()
	opm := filepath.Join(testbin, "opm")
	torusCSV = bundleCSV().Name

	jobsetBundle := filepath.Join(workDir, "bundles", jobsetPackage)
	writeJobSetBundle(jobsetBundle)
	brokenBundle := filepath.Join(workDir, "bundles", brokenPackage)
	brokenCSV = writeBrokenBundle(brokenBundle)

	for _, p := range []struct{ pkg, channel, bundle, csv string }{
		{torusPackage, "candidate", filepath.Join(root, "bundle"), torusCSV},
		{jobsetPackage, "stable", jobsetBundle, jobsetCSV},
		{brokenPackage, "candidate", brokenBundle, brokenCSV},
	} {
		pkgDir := filepath.Join(dir, p.pkg)
		Expect(os.MkdirAll(pkgDir, 0o755)).To(Succeed())
		write(filepath.Join(pkgDir, "package.yaml"), run(root, opm, "init", p.pkg, "--default-channel="+p.channel, "--output=yaml"))
		write(filepath.Join(pkgDir, "bundle.yaml"), run(root, opm, "render", p.bundle, "--output=yaml"))
		channel, err := yaml.Marshal(map[string]any{
			"schema": "olm.channel", "package": p.pkg, "name": p.channel,
			"entries": []any{map[string]any{"name": p.csv}},
		})
		Expect(err).NotTo(HaveOccurred())
		write(filepath.Join(pkgDir, "channel.yaml"), string(channel))
	}
	run(root, opm, "validate", dir)
	return torusCSV, brokenCSV
}

func write(path, data string) {
	GinkgoHelper()
	Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	Expect(os.WriteFile(path, []byte(data), 0o644)).To(Succeed())
}

func writeYAML(path string, obj any) {
	GinkgoHelper()
	data, err := yaml.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	write(path, string(data))
}

// writeJobSetBundle writes a registry+v1 bundle that provides JobSet: its
// CRD from the pinned module and a controller Deployment, which on this
// cluster runs on a kwok node (the real JobSet controller already runs as a
// process of the local cluster), also when a real node runs beside them:
// its image is not in the real node's store.
func writeJobSetBundle(dir string) {
	GinkgoHelper()
	crdFile := filepath.Join(framework.ModuleDir("sigs.k8s.io/jobset"), "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml")
	crds, err := render.DecodeFile(crdFile)
	Expect(err).NotTo(HaveOccurred())
	Expect(crds).To(HaveLen(1))
	writeYAML(filepath.Join(dir, "manifests", "jobset.x-k8s.io_jobsets.yaml"), crds[0].Object)

	labels := map[string]any{"app.kubernetes.io/name": "jobset"}
	writeYAML(filepath.Join(dir, "manifests", "jobset-operator.clusterserviceversion.yaml"), map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "ClusterServiceVersion",
		"metadata":   map[string]any{"name": jobsetCSV},
		"spec": map[string]any{
			"displayName": "JobSet (test stand-in)",
			"description": "Provides jobset.x-k8s.io/v1alpha2 JobSet for the OLM end-to-end suite.",
			"version":     "0.12.0",
			"provider":    map[string]any{"name": "test"},
			"installModes": []any{
				map[string]any{"type": "OwnNamespace", "supported": false},
				map[string]any{"type": "SingleNamespace", "supported": false},
				map[string]any{"type": "MultiNamespace", "supported": false},
				map[string]any{"type": "AllNamespaces", "supported": true},
			},
			"customresourcedefinitions": map[string]any{"owned": []any{map[string]any{
				"name": "jobsets.jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet", "displayName": "JobSet",
				"description": "A group of Jobs run as a unit.",
			}}},
			"install": map[string]any{
				"strategy": "deployment",
				"spec": map[string]any{
					"clusterPermissions": []any{map[string]any{
						"serviceAccountName": "jobset-controller-manager",
						"rules": []any{map[string]any{
							"apiGroups": []any{"jobset.x-k8s.io"}, "resources": []any{"jobsets"}, "verbs": []any{"get", "list", "watch"},
						}},
					}},
					"deployments": []any{map[string]any{
						"name": "jobset-controller-manager",
						"spec": map[string]any{
							"replicas": 1,
							"selector": map[string]any{"matchLabels": labels},
							"template": map[string]any{
								"metadata": map[string]any{"labels": labels},
								"spec": map[string]any{
									"serviceAccountName": "jobset-controller-manager",
									"securityContext":    map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
									"nodeSelector":       map[string]any{"type": "kwok"},
									"tolerations":        []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}},
									"containers": []any{map[string]any{
										"name":  "manager",
										"image": "registry.k8s.io/jobset/jobset:v0.12.0",
										"securityContext": map[string]any{
											"allowPrivilegeEscalation": false,
											"capabilities":             map[string]any{"drop": []any{"ALL"}},
										},
									}},
								},
							},
						},
					}},
				},
			},
		},
	})
	writeYAML(filepath.Join(dir, "metadata", "annotations.yaml"), map[string]any{"annotations": map[string]any{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         jobsetPackage,
		"operators.operatorframework.io.bundle.channels.v1":        "stable",
		"operators.operatorframework.io.bundle.channel.default.v1": "stable",
	}})
}

// writeBrokenBundle copies bundle/ into its own package with one mistake:
// the manager requests more CPU than its limit, which the API server
// refuses when OLM creates the Deployment. It returns the CSV's name.
func writeBrokenBundle(dir string) string {
	GinkgoHelper()
	src := filepath.Join(root, "bundle")
	files, err := filepath.Glob(filepath.Join(src, "*", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	name := ""
	for _, f := range files {
		rel, _ := filepath.Rel(src, f)
		objs, err := render.DecodeFile(f)
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(HaveLen(1))
		o := objs[0]
		switch {
		case o.GetKind() == "ClusterServiceVersion":
			o.SetName(brokenPackage + ".v" + bundleCSV().Spec.Version.String())
			name = o.GetName()
			deployments, _, _ := unstructured.NestedSlice(o.Object, "spec", "install", "spec", "deployments")
			d := deployments[0].(map[string]any)
			containers, _, _ := unstructured.NestedSlice(d, "spec", "template", "spec", "containers")
			Expect(unstructured.SetNestedField(containers[0].(map[string]any), "2", "resources", "requests", "cpu")).To(Succeed())
			Expect(unstructured.SetNestedField(containers[0].(map[string]any), "1", "resources", "limits", "cpu")).To(Succeed())
			Expect(unstructured.SetNestedSlice(d, containers, "spec", "template", "spec", "containers")).To(Succeed())
			Expect(unstructured.SetNestedSlice(o.Object, deployments, "spec", "install", "spec", "deployments")).To(Succeed())
		case rel == filepath.Join("metadata", "annotations.yaml"):
			Expect(unstructured.SetNestedField(o.Object, brokenPackage, "annotations", "operators.operatorframework.io.bundle.package.v1")).To(Succeed())
		}
		writeYAML(filepath.Join(dir, rel), o.Object)
	}
	Expect(name).NotTo(BeEmpty())
	return name
}
