package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/hack/bundle/rbaccheck"
	"github.com/torus-mpi/torus/hack/manifests/render"
)

// newestKubernetes is the Kubernetes the local cluster runs; the
// deprecated-API checks look for APIs removed by then.
const newestKubernetes = "1.36"

func root(t *testing.T) string {
	t.Helper()
	r, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func bundleDir(t *testing.T) string { return filepath.Join(root(t), "bundle") }

var (
	loadOnce sync.Once
	loaded   *manifests.Bundle
	loadErr  error
)

// committed is bundle/ as OLM's own loader reads it.
func committed(t *testing.T) *manifests.Bundle {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = manifests.GetBundleFromDir(bundleDir(t)) })
	if loadErr != nil {
		t.Fatalf("loading bundle/: %v", loadErr)
	}
	return loaded
}

var (
	overlaysOnce sync.Once
	overlays     map[string][]*unstructured.Unstructured
	overlaysErr  error
)

func kustomized(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	overlaysOnce.Do(func() {
		overlays = map[string][]*unstructured.Unstructured{}
		for _, name := range append([]string{render.Base}, render.Overlays...) {
			objs, err := render.Objects(render.Path(root(t), name))
			if err != nil {
				overlaysErr = err
				return
			}
			overlays[name] = objs
		}
	})
	if overlaysErr != nil {
		t.Fatal(overlaysErr)
	}
	return overlays
}

// bundle/ must be what make bundle writes now: stale CRDs or RBAC in the
// bundle would install something other than what kustomize installs.
func TestBundleIsUpToDate(t *testing.T) {
	want, err := generate(root(t), options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	dir := bundleDir(t)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		got[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("bundle/%s is missing: run make bundle", name)
		} else if !bytes.Equal(got[name], want[name]) {
			t.Errorf("bundle/%s is stale: run make bundle", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("bundle/%s is not generated: run make bundle", name)
		}
	}
}

// The validators OperatorHub's pipeline runs, with no error and no warning.
func TestBundleValidates(t *testing.T) {
	b := committed(t)
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.OperatorHubV2Validator,
		validation.GoodPracticesValidator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
	)
	// The CRDs, the CSV, the other objects and the bundle itself, as
	// operator-sdk's bundle validate passes them.
	objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": newestKubernetes})
	results := validators.Validate(objs...)
	checked := 0
	for _, r := range results {
		checked++
		for _, e := range r.Errors {
			t.Errorf("error from %s: %s", r.Name, e)
		}
		for _, w := range r.Warnings {
			t.Errorf("warning from %s: %s", r.Name, w)
		}
	}
	// One result for the CSV, one per CRD, and one from each of the five
	// validators that read the whole bundle.
	if checked < 1+len(b.V1CRDs)+5 {
		t.Errorf("only %d validation results: a validator did not see the bundle", checked)
	}
	if b.CSV.Name != packageName+".v"+b.CSV.Spec.Version.String() {
		t.Errorf("CSV %s does not follow %s.v<version>", b.CSV.Name, packageName)
	}
	if b.Package != packageName || b.DefaultChannel != channel {
		t.Errorf("package %q, default channel %q", b.Package, b.DefaultChannel)
	}
	// A broken bundle must fail, or the zero above proves nothing.
	broken := *b
	csv := b.CSV.DeepCopy()
	csv.Spec.Provider.Name = ""
	csv.Annotations["categories"] = "Not A Category"
	broken.CSV = csv
	if !hasError(validators.Validate(broken.ObjectsToValidate()...)) {
		t.Error("the validators accept a CSV without provider and with an unknown category")
	}
}

func hasError(results []errors.ManifestResult) bool {
	return slices.ContainsFunc(results, func(r errors.ManifestResult) bool { return r.HasError() })
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func convert(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if o == nil {
		t.Fatalf("missing object for %T", into)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatal(err)
	}
}

// Bundle and kustomize install the same CRDs, grant the same RBAC, run the
// same manager and register the same webhooks.
func TestBundleAgreesWithKustomize(t *testing.T) {
	b := committed(t)
	strategy := b.CSV.Spec.InstallStrategy.StrategySpec
	if len(strategy.ClusterPermissions) != 1 || len(strategy.Permissions) != 1 || len(strategy.DeploymentSpecs) != 1 {
		t.Fatalf("want one clusterPermissions, permissions and deployment, got %d, %d, %d",
			len(strategy.ClusterPermissions), len(strategy.Permissions), len(strategy.DeploymentSpecs))
	}
	// The CRDs as written: OLM's loader defaults fields on the way in.
	var bundleCRDs []*unstructured.Unstructured
	files, err := filepath.Glob(filepath.Join(bundleDir(t), "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		objs, err := render.DecodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				bundleCRDs = append(bundleCRDs, o)
			}
		}
	}
	for name, objs := range kustomized(t) {
		var crds []string
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			crds = append(crds, o.GetName())
			got := find(bundleCRDs, o.GetKind(), o.GetName())
			if got == nil {
				t.Errorf("%s: CRD %s is not in the bundle", name, o.GetName())
				continue
			}
			if diff := cmp.Diff(o.Object, got.Object); diff != "" {
				t.Errorf("%s: CRD %s differs (-kustomize,+bundle):\n%s", name, o.GetName(), short(diff))
			}
		}
		if len(crds) != len(bundleCRDs) {
			t.Errorf("%s installs CRDs %v, the bundle %d", name, crds, len(bundleCRDs))
		}

		var cr rbacv1.ClusterRole
		convert(t, find(objs, "ClusterRole", roleName), &cr)
		if diff := cmp.Diff(cr.Rules, strategy.ClusterPermissions[0].Rules); diff != "" {
			t.Errorf("%s: ClusterRole rules differ from clusterPermissions (-kustomize,+bundle):\n%s", name, diff)
		}
		var role rbacv1.Role
		convert(t, find(objs, "Role", roleName), &role)
		if diff := cmp.Diff(role.Rules, strategy.Permissions[0].Rules); diff != "" {
			t.Errorf("%s: Role rules differ from permissions (-kustomize,+bundle):\n%s", name, diff)
		}
		var sa, crb, rb = find(objs, "ServiceAccount", "torus-operator"), rbacv1.ClusterRoleBinding{}, rbacv1.RoleBinding{}
		convert(t, find(objs, "ClusterRoleBinding", "torus-operator"), &crb)
		convert(t, find(objs, "RoleBinding", "torus-operator"), &rb)
		for _, subjects := range [][]rbacv1.Subject{crb.Subjects, rb.Subjects} {
			if len(subjects) != 1 || subjects[0].Name != sa.GetName() || subjects[0].Name != strategy.ClusterPermissions[0].ServiceAccountName {
				t.Errorf("%s: bindings %v do not bind the CSV's ServiceAccount %s", name, subjects, strategy.ClusterPermissions[0].ServiceAccountName)
			}
		}

		// The manager: identical but for the certificate, which OLM mounts
		// itself, the image, which make bundle may pin by digest, and where
		// the status endpoint is, which OLM's names give.
		var d appsv1.Deployment
		convert(t, find(objs, "Deployment", deploymentName), &d)
		want := d.Spec.DeepCopy()
		want.Template.Spec.Volumes = nil
		want.Template.Spec.Containers[0].VolumeMounts = nil
		want.Template.Spec.Containers[0].Args = append(want.Template.Spec.Containers[0].Args,
			"--status-server-service=torus-operator-service:443", "--status-server-ca-secret=torus-operator-service-cert:olmCAKey")
		got := strategy.DeploymentSpecs[0].Spec.DeepCopy()
		got.Template.Spec.Containers[0].Image = want.Template.Spec.Containers[0].Image
		if diff := cmp.Diff(*want, *got); diff != "" {
			t.Errorf("%s: the manager Deployment differs (-kustomize,+bundle):\n%s", name, diff)
		}

		var hooks []string
		for _, o := range objs {
			switch o.GetKind() {
			case "MutatingWebhookConfiguration":
				var c admissionregistrationv1.MutatingWebhookConfiguration
				convert(t, o, &c)
				for _, h := range c.Webhooks {
					hooks = append(hooks, h.Name)
					compareWebhook(t, name, b.CSV, operatorsv1alpha1.MutatingAdmissionWebhook, h.Name, *h.ClientConfig.Service.Path,
						h.Rules, *h.FailurePolicy, *h.SideEffects, h.AdmissionReviewVersions, h.ObjectSelector)
				}
			case "ValidatingWebhookConfiguration":
				var c admissionregistrationv1.ValidatingWebhookConfiguration
				convert(t, o, &c)
				for _, h := range c.Webhooks {
					hooks = append(hooks, h.Name)
					compareWebhook(t, name, b.CSV, operatorsv1alpha1.ValidatingAdmissionWebhook, h.Name, *h.ClientConfig.Service.Path,
						h.Rules, *h.FailurePolicy, *h.SideEffects, h.AdmissionReviewVersions, h.ObjectSelector)
				}
			}
		}
		if len(hooks) != len(b.CSV.Spec.WebhookDefinitions) {
			t.Errorf("%s registers webhooks %v, the bundle %d", name, hooks, len(b.CSV.Spec.WebhookDefinitions))
		}
	}
}

// short keeps a diff of 2 MB CRDs readable.
func short(diff string) string {
	const max = 3000
	if len(diff) > max {
		return diff[:max] + "\n…"
	}
	return diff
}

func compareWebhook(t *testing.T, overlay string, csv *operatorsv1alpha1.ClusterServiceVersion, typ operatorsv1alpha1.WebhookAdmissionType,
	name, path string, rules []admissionregistrationv1.RuleWithOperations, policy admissionregistrationv1.FailurePolicyType,
	effects admissionregistrationv1.SideEffectClass, versions []string, objects *metav1.LabelSelector) {
	t.Helper()
	i := slices.IndexFunc(csv.Spec.WebhookDefinitions, func(w operatorsv1alpha1.WebhookDescription) bool { return w.GenerateName == name })
	if i < 0 {
		t.Errorf("%s: webhook %s is not in the CSV", overlay, name)
		return
	}
	w := csv.Spec.WebhookDefinitions[i]
	if w.Type != typ || w.WebhookPath == nil || *w.WebhookPath != path || w.DeploymentName != deploymentName ||
		*w.FailurePolicy != policy || *w.SideEffects != effects || !slices.Equal(w.AdmissionReviewVersions, versions) {
		t.Errorf("%s: webhook %s differs from the CSV's: %+v", overlay, name, w)
	}
	if diff := cmp.Diff(rules, w.Rules); diff != "" {
		t.Errorf("%s: webhook %s rules differ (-kustomize,+bundle):\n%s", overlay, name, diff)
	}
	if diff := cmp.Diff(objects, w.ObjectSelector); diff != "" {
		t.Errorf("%s: webhook %s object selectors differ (-kustomize,+bundle):\n%s", overlay, name, diff)
	}
	if w.TargetPort == nil || w.TargetPort.IntValue() != 9443 {
		t.Errorf("%s: webhook %s targets port %v, want the manager's 9443", overlay, name, w.TargetPort)
	}
}

// Least privilege: no wildcard and no Secret access beyond the operator's
// needs, in the CSV and in every kustomize flavour.
func TestLeastPrivilege(t *testing.T) {
	strategy := committed(t).CSV.Spec.InstallStrategy.StrategySpec
	var v []string
	for _, p := range strategy.ClusterPermissions {
		v = append(v, rbaccheck.Violations("CSV clusterPermissions", p.Rules)...)
	}
	for _, p := range strategy.Permissions {
		v = append(v, rbaccheck.Violations("CSV permissions", p.Rules)...)
	}
	for name, objs := range kustomized(t) {
		for _, kind := range []string{"ClusterRole", "Role"} {
			for _, o := range objs {
				if o.GetKind() != kind {
					continue
				}
				var role rbacv1.ClusterRole
				convert(t, o, &role)
				v = append(v, rbaccheck.Violations(name+" "+kind+" "+o.GetName(), role.Rules)...)
			}
		}
	}
	for _, msg := range v {
		t.Error(msg)
	}
	// The check itself must bite.
	for name, rules := range map[string][]rbacv1.PolicyRule{
		"wildcard verb":     {{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"*"}}},
		"wildcard resource": {{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"get"}}},
		"secret update":     {{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}}},
		"escalate":          {{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}}},
		"webhook configuration reads beyond one name": {{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, Verbs: []string{"get", "list"},
			ResourceNames: []string{"validator.trainer.kubeflow.org"}}},
		"webhook configuration update": {{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, Verbs: []string{"update"},
			ResourceNames: []string{"validator.trainer.kubeflow.org"}}},
	} {
		if len(rbaccheck.Violations(name, rules)) == 0 {
			t.Errorf("the least-privilege check accepts %s", name)
		}
	}
}

// Every descriptor path names a field of its CRD, and every kind has an
// example that its CRD's schema would keep.
func TestDescriptorsAndExamples(t *testing.T) {
	b := committed(t)
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, crd := range b.V1CRDs {
		for _, v := range crd.Spec.Versions {
			schemas[crd.Spec.Names.Kind+"/"+v.Name] = v.Schema.OpenAPIV3Schema
		}
	}
	for _, owned := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		s := schemas[owned.Kind+"/"+owned.Version]
		if s == nil {
			t.Errorf("owned %s/%s has no CRD", owned.Kind, owned.Version)
			continue
		}
		for _, d := range owned.SpecDescriptors {
			if !hasPath(s.Properties["spec"], d.Path) {
				t.Errorf("%s spec descriptor %q is not a field of the CRD", owned.Kind, d.Path)
			}
		}
		for _, d := range owned.StatusDescriptors {
			if !hasPath(s.Properties["status"], d.Path) {
				t.Errorf("%s status descriptor %q is not a field of the CRD", owned.Kind, d.Path)
			}
		}
		if len(owned.SpecDescriptors) == 0 || owned.DisplayName == "" || owned.Description == "" {
			t.Errorf("%s needs a display name, a description and spec descriptors", owned.Kind)
		}
	}
	var examples []map[string]any
	if err := yaml.Unmarshal([]byte(b.CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	kinds := map[string]bool{}
	for _, ex := range examples {
		kinds[ex["kind"].(string)] = true
	}
	for _, owned := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		if !kinds[owned.Kind] {
			t.Errorf("no alm-example for %s", owned.Kind)
		}
	}
}

func hasPath(s apiextensionsv1.JSONSchemaProps, path string) bool {
	for _, field := range strings.Split(path, ".") {
		next, ok := s.Properties[field]
		if !ok {
			return false
		}
		s = next
	}
	return true
}

// disconnected is true only for an image pinned by digest, which is then
// the related image mirroring tools copy.
func TestDisconnectedFollowsTheImage(t *testing.T) {
	for image, want := range map[string]string{
		"": "false",
		imageRepo + "@sha256:" + strings.Repeat("ab", 32): "true",
	} {
		files, err := generate(root(t), options{image: image})
		if err != nil {
			t.Fatal(err)
		}
		var csv operatorsv1alpha1.ClusterServiceVersion
		if err := yaml.Unmarshal(files[csvFile], &csv); err != nil {
			t.Fatal(err)
		}
		if got := csv.Annotations[disconnectedAnnotation]; got != want {
			t.Errorf("image %q: disconnected %q, want %q", image, got, want)
		}
		ref := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Image
		if len(csv.Spec.RelatedImages) != 1 || csv.Spec.RelatedImages[0].Image != ref || csv.Annotations["containerImage"] != ref {
			t.Errorf("image %q: relatedImages %v and containerImage %q must name the manager's image %s",
				image, csv.Spec.RelatedImages, csv.Annotations["containerImage"], ref)
		}
	}
}
