package render

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/torus-mpi/torus/operator/app"
)

const (
	image        = "ghcr.io/torus-mpi/torus-operator"
	certSecret   = "torus-webhook-server-cert"
	certDir      = "/tmp/k8s-webhook-server/serving-certs"
	operatorNS   = "torus-system"
	webhookSvc   = "torus-webhook"
	deployName   = "torus-operator"
	operatorRole = "torus-operator"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	renderOnce sync.Once
	renderOut  map[string][]*unstructured.Unstructured
	renderErr  error
)

// rendered builds the base and every overlay once for all tests: each
// build is 2.4 MB of CRDs. Tests must not modify the objects.
func rendered(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	renderOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			renderErr = err
			return
		}
		renderOut = map[string][]*unstructured.Unstructured{}
		for _, name := range append([]string{Base}, Overlays...) {
			objs, err := Objects(Path(root, name))
			if err != nil {
				renderErr = fmt.Errorf("rendering %s: %w", name, err)
				return
			}
			renderOut[name] = objs
		}
	})
	if renderErr != nil {
		t.Fatal(renderErr)
	}
	return renderOut
}

func key(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	o := find(objs, "Deployment", deployName)
	if o == nil {
		t.Fatalf("no Deployment %s", deployName)
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// Every object make generate writes must reach every install flavour:
// a new CRD or webhook that the base forgot would otherwise ship missing.
func TestEveryGeneratedObjectIsRendered(t *testing.T) {
	root := repoRoot(t)
	var files []string
	for _, pattern := range []string{"crd/*/*.yaml", "rbac/*.yaml", "webhook/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, "kustomize", pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 6 {
		t.Fatalf("found only %d generated files: %v", len(files), files)
	}
	for name, objs := range rendered(t) {
		for _, f := range files {
			gen, err := DecodeFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gen {
				renamed := strings.NewReplacer("mutating-webhook-configuration", "torus-mutating-webhook-configuration",
					"validating-webhook-configuration", "torus-validating-webhook-configuration").Replace(g.GetName())
				if find(objs, g.GetKind(), renamed) == nil {
					t.Errorf("%s: %s %s from %s is not rendered; add the file to kustomize/base/kustomization.yaml",
						name, g.GetKind(), g.GetName(), f)
				}
			}
		}
	}
}

// The CRDs ship exactly as generated: no label or namespace transformer
// may rewrite a schema.
func TestCRDsAreTheGeneratedOnes(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "kustomize", "crd", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, objs := range rendered(t) {
		for _, f := range files {
			gen, err := DecodeFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gen {
				got := find(objs, g.GetKind(), g.GetName())
				if got == nil {
					continue // reported by TestEveryGeneratedObjectIsRendered
				}
				if diff := cmp.Diff(g.Object["spec"], got.Object["spec"]); diff != "" {
					t.Errorf("%s: CRD %s spec differs from %s (-generated,+rendered):\n%s", name, g.GetName(), f, diff)
				}
			}
		}
	}
}

func TestOverlaysHaveOneOfEachObject(t *testing.T) {
	want := []string{
		"Namespace//" + operatorNS,
		"ServiceAccount/" + operatorNS + "/torus-operator",
		"ClusterRole//" + operatorRole,
		"ClusterRoleBinding//torus-operator",
		"Role/" + operatorNS + "/" + operatorRole,
		"RoleBinding/" + operatorNS + "/torus-operator",
		"Deployment/" + operatorNS + "/" + deployName,
		"Service/" + operatorNS + "/" + webhookSvc,
		"Service/" + operatorNS + "/torus-operator-metrics",
		"MutatingWebhookConfiguration//torus-mutating-webhook-configuration",
		"ValidatingWebhookConfiguration//torus-validating-webhook-configuration",
	}
	for name, objs := range rendered(t) {
		seen := map[string]int{}
		for _, o := range objs {
			seen[key(o)]++
		}
		for _, w := range want {
			if seen[w] != 1 {
				t.Errorf("%s: %s appears %d times, want once", name, w, seen[w])
			}
		}
		for k, n := range seen {
			if n > 1 {
				t.Errorf("%s: %s appears %d times", name, k, n)
			}
		}
	}
}

// The manager's pod runs the release image, and is sized and probed. That
// PodSecurity and OpenShift's SCC admission admit it is proven with their
// own code (test/integration/webhook).
func TestManagerPod(t *testing.T) {
	version, err := Version(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, objs := range rendered(t) {
		d := deployment(t, objs)
		spec := &d.Spec.Template.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: want one container, got %d", name, len(spec.Containers))
		}
		c := spec.Containers[0]
		if c.Image != image+":v"+version {
			t.Errorf("%s: image %s, want %s:v%s (VERSION)", name, c.Image, image, version)
		}
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("%s: the root filesystem must be read-only", name)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s: liveness and readiness probes are required", name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: CPU and memory requests and a memory limit are required", name)
		}
		if spec.ServiceAccountName != "torus-operator" {
			t.Errorf("%s: serviceAccountName %q", name, spec.ServiceAccountName)
		}
		// The arguments must be flags the operator really has.
		fs := pflag.NewFlagSet("torus-operator", pflag.ContinueOnError)
		var o app.Options
		o.AddFlags(fs)
		if err := fs.Parse(c.Args); err != nil {
			t.Errorf("%s: operator arguments %v: %v", name, c.Args, err)
		}
		if o.WebhookCertDir != certDir {
			t.Errorf("%s: --webhook-cert-dir %q, want %q (where OLM and the overlays mount the certificate)", name, o.WebhookCertDir, certDir)
		}
		if !o.LeaderElect {
			t.Errorf("%s: leader election must be on", name)
		}
		if port := namedPort(c, "webhook"); port != int32(o.WebhookPort) {
			t.Errorf("%s: container port \"webhook\" %d, --webhook-port %d", name, port, o.WebhookPort)
		}
	}
}

func namedPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// Each webhook calls the torus-webhook Service, which reaches the
// container's webhook port.
func TestWebhooksReachTheManager(t *testing.T) {
	for name, objs := range rendered(t) {
		svc := find(objs, "Service", webhookSvc)
		if svc == nil {
			t.Fatalf("%s: no Service %s", name, webhookSvc)
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		if len(ports) != 1 || ports[0].(map[string]any)["targetPort"] != "webhook" {
			t.Errorf("%s: Service %s must target the container port named webhook: %v", name, webhookSvc, ports)
		}
		n := 0
		for _, o := range objs {
			if !strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
				continue
			}
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				n++
				ref, _, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
				if ref["name"] != webhookSvc || ref["namespace"] != operatorNS {
					t.Errorf("%s: webhook %v calls %s/%s, want %s/%s", name, h.(map[string]any)["name"], ref["namespace"], ref["name"], operatorNS, webhookSvc)
				}
			}
		}
		if n < 4 {
			t.Errorf("%s: %d webhooks rendered, want the 4 make generate writes", name, n)
		}
	}
}

// Each overlay provides the certificate the manager mounts, and the CA that
// signs it to the API server.
func TestWebhookCertificates(t *testing.T) {
	objs := rendered(t)
	if vols := deployment(t, objs[Base]).Spec.Template.Spec.Volumes; len(vols) != 0 {
		t.Errorf("base: the manager mounts %v; the base must leave the certificate to OLM and the overlays", vols)
	}
	for _, name := range Overlays {
		d := deployment(t, objs[name])
		spec := d.Spec.Template.Spec
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == certSecret })
		if i < 0 {
			t.Errorf("%s: the manager does not mount Secret %s", name, certSecret)
			continue
		}
		mounted := slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == spec.Volumes[i].Name && m.MountPath == certDir && m.ReadOnly
		})
		if !mounted {
			t.Errorf("%s: Secret %s is not mounted read-only at %s", name, certSecret, certDir)
		}
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			for _, o := range objs[name] {
				if o.GetKind() != kind {
					continue
				}
				a := o.GetAnnotations()
				switch name {
				case "kubernetes":
					if a["cert-manager.io/inject-ca-from"] != operatorNS+"/torus-webhook" {
						t.Errorf("%s: %s does not take its CA from Certificate torus-webhook: %v", name, o.GetName(), a)
					}
				case "openshift":
					if a["service.beta.openshift.io/inject-cabundle"] != "true" {
						t.Errorf("%s: %s does not take its CA from the service CA: %v", name, o.GetName(), a)
					}
				}
			}
		}
		switch name {
		case "kubernetes":
			cert := find(objs[name], "Certificate", "torus-webhook")
			if cert == nil {
				t.Fatalf("%s: no Certificate", name)
			}
			secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			if secret != certSecret || !slices.Contains(dns, webhookSvc+"."+operatorNS+".svc") {
				t.Errorf("%s: Certificate writes %s for %v", name, secret, dns)
			}
			ns := find(objs[name], "Namespace", operatorNS)
			if ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("%s: the namespace must enforce the restricted Pod Security Standard", name)
			}
		case "openshift":
			svc := find(objs[name], "Service", webhookSvc)
			if svc.GetAnnotations()["service.beta.openshift.io/serving-cert-secret-name"] != certSecret {
				t.Errorf("%s: the service CA does not write %s", name, certSecret)
			}
		}
	}
}

// The shipped image tag follows VERSION.
func TestImageTagFollowsVersion(t *testing.T) {
	root := repoRoot(t)
	version, err := Version(root)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "kustomize", "base", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "newTag: v"+version+"\n") {
		t.Errorf("kustomize/base/kustomization.yaml does not tag the image v%s (VERSION)", version)
	}
}
