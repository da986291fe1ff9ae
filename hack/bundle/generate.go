package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/hack/manifests/render"
)

const (
	packageName    = "torus-operator"
	channel        = "candidate"
	imageRepo      = "ghcr.io/torus-mpi/torus-operator"
	csvBasePath    = "kustomize/manifests/bases/torus-operator.clusterserviceversion.yaml"
	iconPath       = "kustomize/manifests/bases/torus.svg"
	deploymentName = "torus-operator"
	containerName  = "manager"
	metricsService = "torus-operator-metrics"
	webhookService = "torus-webhook"
	roleName       = "torus-operator"
	// userRolePrefix names the roles for users (kustomize/userroles).
	userRolePrefix = "torus-mpi-"
	csvFile        = "manifests/torus-operator.clusterserviceversion.yaml"

	disconnectedAnnotation = "features.operators.openshift.io/disconnected"
)

// examples names the sample each owned kind's alm-example comes from: the
// files users apply are the examples OperatorHub shows. TrainingRuntime has
// no sample of its own; its example is the ClusterTrainingRuntime's
// template, namespaced.
var examples = map[string]string{
	"TrainJob":               "samples/trainjobs/pi-openmpi.yaml",
	"ClusterTrainingRuntime": "samples/runtimes/torus-openmpi.yaml",
	"TrainingRuntime":        "samples/runtimes/torus-openmpi.yaml",
	"MPINetworkProfile":      "samples/networks/roce-macvlan.yaml",
}

type options struct {
	out     string
	version string
	image   string
}

// bundleParts are the pieces of kustomize/base a bundle is made of.
type bundleParts struct {
	crds           []*unstructured.Unstructured
	clusterRules   []any
	rules          []any
	deployment     map[string]any
	webhooks       []any
	extra          []*unstructured.Unstructured
	serviceAccount string
}

// generate returns the bundle's files by path relative to the bundle
// directory.
func generate(root string, o options) (map[string][]byte, error) {
	version := o.version
	if version == "" {
		v, err := render.Version(root)
		if err != nil {
			return nil, err
		}
		version = v
	}
	if _, err := semver.Parse(version); err != nil {
		return nil, fmt.Errorf("version %q is not semver: %w", version, err)
	}
	image := o.image
	if image == "" {
		image = imageRepo + ":v" + version
	}
	objs, err := render.Objects(render.Path(root, render.Base))
	if err != nil {
		return nil, err
	}
	parts, err := split(objs, image)
	if err != nil {
		return nil, err
	}
	csv, err := buildCSV(root, version, image, parts)
	if err != nil {
		return nil, err
	}

	files := map[string][]byte{}
	add := func(name string, obj any) error {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", name, err)
		}
		files[name] = data
		return nil
	}
	if err := add(csvFile, csv); err != nil {
		return nil, err
	}
	for _, crd := range parts.crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		if err := add("manifests/"+group+"_"+plural+".yaml", crd.Object); err != nil {
			return nil, err
		}
	}
	for _, x := range parts.extra {
		x = x.DeepCopy()
		// OLM creates bundle objects in the namespace it installs into.
		x.SetNamespace("")
		version := strings.ReplaceAll(x.GetAPIVersion(), "/", "_")
		if err := add(fmt.Sprintf("manifests/%s_%s_%s.yaml", x.GetName(), version, strings.ToLower(x.GetKind())), x.Object); err != nil {
			return nil, err
		}
	}
	labels := bundleLabels()
	if err := add("metadata/annotations.yaml", map[string]any{"annotations": labels}); err != nil {
		return nil, err
	}
	if err := add("metadata/dependencies.yaml", dependencies()); err != nil {
		return nil, err
	}
	files["bundle.Dockerfile"] = dockerfile(labels)
	return files, nil
}

// split sorts the rendered base into what the CSV describes and what ships
// as plain bundle objects. Every kind must find a place: a new object in
// the base must not silently miss the bundle.
func split(objs []*unstructured.Unstructured, image string) (*bundleParts, error) {
	p := &bundleParts{}
	for _, o := range objs {
		switch kind, name := o.GetKind(), o.GetName(); {
		case kind == "CustomResourceDefinition":
			p.crds = append(p.crds, o)
		case kind == "ClusterRole" && name == roleName:
			p.clusterRules, _, _ = unstructured.NestedSlice(o.Object, "rules")
		case kind == "Role" && name == roleName:
			p.rules, _, _ = unstructured.NestedSlice(o.Object, "rules")
		case kind == "Deployment" && name == deploymentName:
			spec, _, _ := unstructured.NestedMap(o.Object, "spec")
			if err := setImage(spec, image); err != nil {
				return nil, err
			}
			if err := setStatusServer(spec); err != nil {
				return nil, err
			}
			p.deployment = spec
			p.serviceAccount, _, _ = unstructured.NestedString(spec, "template", "spec", "serviceAccountName")
		case kind == "MutatingWebhookConfiguration" || kind == "ValidatingWebhookConfiguration":
			defs, err := webhookDefinitions(o)
			if err != nil {
				return nil, err
			}
			p.webhooks = append(p.webhooks, defs...)
		case kind == "Service" && name == metricsService,
			// OLM installs PodDisruptionBudgets shipped in a bundle.
			kind == "PodDisruptionBudget" && name == deploymentName,
			// The users' roles (kustomize/userroles): OLM installs
			// ClusterRoles and ClusterRoleBindings shipped as bundle
			// objects as they are.
			(kind == "ClusterRole" || kind == "ClusterRoleBinding") && strings.HasPrefix(name, userRolePrefix):
			p.extra = append(p.extra, o)
		// OLM makes these itself: the namespace is the install namespace,
		// the ServiceAccount and bindings come from the CSV's
		// permissions, and the webhook Service is <deployment>-service.
		case kind == "Namespace", kind == "ServiceAccount", kind == "ClusterRoleBinding", kind == "RoleBinding",
			kind == "Service" && name == webhookService:
		default:
			return nil, fmt.Errorf("%s %s in kustomize/base has no place in the bundle: teach hack/bundle about it", kind, name)
		}
	}
	switch {
	case p.deployment == nil:
		return nil, fmt.Errorf("kustomize/base has no Deployment %s", deploymentName)
	case p.clusterRules == nil || p.rules == nil:
		return nil, fmt.Errorf("kustomize/base lacks the ClusterRole or the Role %s (make generate)", roleName)
	case p.serviceAccount == "":
		return nil, fmt.Errorf("Deployment %s names no ServiceAccount", deploymentName)
	case len(p.crds) == 0:
		return nil, fmt.Errorf("kustomize/base has no CRDs")
	}
	slices.SortFunc(p.crds, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return p, nil
}

func setImage(spec map[string]any, image string) error {
	containers, _, _ := unstructured.NestedSlice(spec, "template", "spec", "containers")
	for i, c := range containers {
		if c.(map[string]any)["name"] == containerName {
			c.(map[string]any)["image"] = image
			containers[i] = c
			return unstructured.SetNestedSlice(spec, containers, "template", "spec", "containers")
		}
	}
	return fmt.Errorf("Deployment %s has no container %s", deploymentName, containerName)
}

// setStatusServer tells the operator where the training pods reach the
// status endpoint it serves beside its webhooks under OLM: OLM names the
// webhooks' Service <deployment>-service (port 443) and keeps the CA of
// their certificate in the Secret <deployment>-service-cert under
// olmCAKey, and names the webhook configurations itself, so the operator
// cannot read them from the configuration kustomize installs.
func setStatusServer(spec map[string]any) error {
	containers, _, _ := unstructured.NestedSlice(spec, "template", "spec", "containers")
	for i, c := range containers {
		c := c.(map[string]any)
		if c["name"] != containerName {
			continue
		}
		args, _, _ := unstructured.NestedStringSlice(c, "args")
		args = append(args,
			"--status-server-service="+olmWebhookService+":443",
			"--status-server-ca-secret="+olmWebhookService+"-cert:olmCAKey")
		if err := unstructured.SetNestedStringSlice(c, args, "args"); err != nil {
			return err
		}
		containers[i] = c
		return unstructured.SetNestedSlice(spec, containers, "template", "spec", "containers")
	}
	return fmt.Errorf("Deployment %s has no container %s", deploymentName, containerName)
}

// olmWebhookService is the Service OLM makes for the Deployment's webhooks.
const olmWebhookService = deploymentName + "-service"

// webhookDefinitions turns a webhook configuration into the CSV's
// webhookdefinitions: OLM makes the Service, the certificate and the
// configuration, and points them at the Deployment's webhook port.
func webhookDefinitions(o *unstructured.Unstructured) ([]any, error) {
	typ := "ValidatingAdmissionWebhook"
	if o.GetKind() == "MutatingWebhookConfiguration" {
		typ = "MutatingAdmissionWebhook"
	}
	hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
	var defs []any
	for _, h := range hooks {
		h := h.(map[string]any)
		name, _ := h["name"].(string)
		path, _, _ := unstructured.NestedString(h, "clientConfig", "service", "path")
		if path == "" {
			return nil, fmt.Errorf("webhook %s has no service path", name)
		}
		if _, ok := h["namespaceSelector"]; ok {
			return nil, fmt.Errorf("webhook %s has a namespaceSelector, which OLM replaces with the OperatorGroup's", name)
		}
		def := map[string]any{
			"type":           typ,
			"generateName":   name,
			"deploymentName": deploymentName,
			// OLM's Service listens on 443; buildCSV points targetPort at
			// the manager's container port named "webhook".
			"containerPort": int64(443),
			"webhookPath":   path,
		}
		for _, k := range []string{"admissionReviewVersions", "sideEffects", "failurePolicy", "rules", "matchPolicy",
			"objectSelector", "timeoutSeconds", "reinvocationPolicy"} {
			if v, ok := h[k]; ok {
				def[k] = v
			}
		}
		defs = append(defs, def)
	}
	return defs, nil
}

func buildCSV(root, version, image string, p *bundleParts) (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(root, csvBasePath))
	if err != nil {
		return nil, fmt.Errorf("reading the CSV base: %w", err)
	}
	var csv map[string]any
	if err := yaml.Unmarshal(data, &csv); err != nil {
		return nil, fmt.Errorf("%s: %w", csvBasePath, err)
	}
	u := &unstructured.Unstructured{Object: csv}
	u.SetName(packageName + ".v" + version)
	ann := u.GetAnnotations()
	ann["containerImage"] = image
	// OpenShift's disconnected mirroring needs every image pinned by digest.
	ann[disconnectedAnnotation] = fmt.Sprint(strings.Contains(image, "@sha256:"))
	alm, err := almExamples(root, p.crds)
	if err != nil {
		return nil, err
	}
	ann["alm-examples"] = alm
	u.SetAnnotations(ann)

	if err := checkOwned(u, p.crds); err != nil {
		return nil, err
	}
	port, err := webhookPort(p.deployment)
	if err != nil {
		return nil, err
	}
	for _, d := range p.webhooks {
		d.(map[string]any)["targetPort"] = port
	}
	icon, err := os.ReadFile(filepath.Join(root, iconPath))
	if err != nil {
		return nil, fmt.Errorf("reading the icon: %w", err)
	}
	set := func(value any, fields ...string) error {
		if err := unstructured.SetNestedField(u.Object, value, fields...); err != nil {
			return fmt.Errorf("setting %s: %w", strings.Join(fields, "."), err)
		}
		return nil
	}
	install := map[string]any{
		"strategy": "deployment",
		"spec": map[string]any{
			"deployments": []any{map[string]any{
				"name":  deploymentName,
				"label": map[string]any{"app.kubernetes.io/name": "torus", "app.kubernetes.io/component": "operator"},
				"spec":  p.deployment,
			}},
			"clusterPermissions": []any{map[string]any{"serviceAccountName": p.serviceAccount, "rules": p.clusterRules}},
			"permissions":        []any{map[string]any{"serviceAccountName": p.serviceAccount, "rules": p.rules}},
		},
	}
	for _, s := range []struct {
		value  any
		fields []string
	}{
		{version, []string{"spec", "version"}},
		{install, []string{"spec", "install"}},
		{p.webhooks, []string{"spec", "webhookdefinitions"}},
		{[]any{map[string]any{"name": "torus-operator", "image": image}}, []string{"spec", "relatedImages"}},
		{[]any{map[string]any{"base64data": base64.StdEncoding.EncodeToString(icon), "mediatype": "image/svg+xml"}}, []string{"spec", "icon"}},
	} {
		if err := set(s.value, s.fields...); err != nil {
			return nil, err
		}
	}
	return u.Object, nil
}

func webhookPort(deployment map[string]any) (int64, error) {
	containers, _, _ := unstructured.NestedSlice(deployment, "template", "spec", "containers")
	for _, c := range containers {
		ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
		for _, p := range ports {
			if p.(map[string]any)["name"] == "webhook" {
				if n, ok := p.(map[string]any)["containerPort"].(int64); ok {
					return n, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("Deployment %s has no container port named webhook", deploymentName)
}

// checkOwned makes the hand-written owned-CRD list and the rendered CRDs
// agree: a CRD without a description in the CSV, or a description of a CRD
// the bundle lacks, is a mistake OLM would only report at install time.
func checkOwned(csv *unstructured.Unstructured, crds []*unstructured.Unstructured) error {
	owned, _, _ := unstructured.NestedSlice(csv.Object, "spec", "customresourcedefinitions", "owned")
	described := map[string]bool{}
	for _, o := range owned {
		o := o.(map[string]any)
		described[fmt.Sprintf("%s/%s/%s", o["name"], o["version"], o["kind"])] = true
	}
	rendered := map[string]bool{}
	for _, crd := range crds {
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			if served, _ := v.(map[string]any)["served"].(bool); served {
				rendered[fmt.Sprintf("%s/%s/%s", crd.GetName(), v.(map[string]any)["name"], kind)] = true
			}
		}
	}
	for k := range rendered {
		if !described[k] {
			return fmt.Errorf("CRD %s is not described in %s (spec.customresourcedefinitions.owned)", k, csvBasePath)
		}
	}
	for k := range described {
		if !rendered[k] {
			return fmt.Errorf("%s describes CRD %s, which kustomize/base does not serve", csvBasePath, k)
		}
	}
	return nil
}

// almExamples returns one example per owned kind, from the samples.
func almExamples(root string, crds []*unstructured.Unstructured) (string, error) {
	var out []any
	for _, crd := range crds {
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		file, ok := examples[kind]
		if !ok {
			return "", fmt.Errorf("no alm-example for %s: add a sample and name it in hack/bundle's examples", kind)
		}
		objs, err := render.DecodeFile(filepath.Join(root, file))
		if err != nil {
			return "", err
		}
		source := kind
		if kind == "TrainingRuntime" {
			source = "ClusterTrainingRuntime"
		}
		i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == source })
		if i < 0 {
			return "", fmt.Errorf("%s holds no %s", file, source)
		}
		ex := objs[i].DeepCopy()
		ex.SetKind(kind)
		out = append(out, ex.Object)
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding alm-examples: %w", err)
	}
	return string(data), nil
}

// bundleLabels are the registry+v1 annotations, in metadata/annotations.yaml
// and as labels of the bundle image.
func bundleLabels() map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         packageName,
		"operators.operatorframework.io.bundle.channels.v1":        channel,
		"operators.operatorframework.io.bundle.channel.default.v1": channel,
	}
}

// dependencies: JobSet is required, and OLM resolves it from the catalogs.
// Kueue is optional, which registry+v1 cannot express (every dependency is
// required): the CSV's description says so instead.
func dependencies() map[string]any {
	return map[string]any{"dependencies": []any{map[string]any{
		"type":  "olm.gvk",
		"value": map[string]any{"group": "jobset.x-k8s.io", "kind": "JobSet", "version": "v1alpha2"},
	}}}
}

func dockerfile(labels map[string]string) []byte {
	var b strings.Builder
	b.WriteString("# The bundle image, built from this directory (make bundle writes it):\n")
	b.WriteString("#   docker build -f bundle/bundle.Dockerfile -t ghcr.io/torus-mpi/torus-operator-bundle:v<version> bundle\n")
	b.WriteString("FROM scratch\n\n")
	for _, k := range sortedKeys(labels) {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, labels[k])
	}
	b.WriteString("\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n")
	return []byte(b.String())
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
