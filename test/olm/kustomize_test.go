package olm

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/test/framework"
)

// kustomizeOverlay installs the kubernetes overlay as `make manifests`
// renders it (dist/manifests/kubernetes.yaml), on the real node, the way an
// administrator with cert-manager applies it. cert-manager is not here: the
// suite does its part from the overlay's own Certificate (a certificate for
// its DNS names in its Secret, its CA injected into the webhook
// configurations that ask for it). The one other change is the local
// cluster's: it runs no kube-proxy, so the pods are told the API server's
// own address, as the OLM spec's Subscription does.
func kustomizeOverlay() {
	const certManagerCA = "cert-manager.io/inject-ca-from"
	var objs []*unstructured.Unstructured

	BeforeAll(func() {
		if !realNode {
			framework.SkipRootTier("no real node on this machine: the overlay's pods would only run on a kwok node")
		}
		var err error
		objs, err = render.Objects(render.Path(root, "kubernetes"))
		Expect(err).NotTo(HaveOccurred())
	})

	It("installs, cert-manager's part done by the suite, and runs two replicas on the real node from this tree's image", func() {
		var cert *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Certificate" {
				cert = o
			}
		}
		Expect(cert).NotTo(BeNil(), "the overlay has no cert-manager Certificate")
		dnsNames, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		Expect(err).NotTo(HaveOccurred())
		secretName, _, err := unstructured.NestedString(cert.Object, "spec", "secretName")
		Expect(err).NotTo(HaveOccurred())
		crt, key := selfSigned(nil, dnsNames)

		api, err := url.Parse(adminCfg.Host)
		Expect(err).NotTo(HaveOccurred())
		var deployment *unstructured.Unstructured
		for _, o := range objs {
			switch {
			case o.GroupVersionKind().Group == "cert-manager.io":
				continue
			case o.GetKind() == "MutatingWebhookConfiguration" || o.GetKind() == "ValidatingWebhookConfiguration":
				Expect(o.GetAnnotations()).To(HaveKeyWithValue(certManagerCA, cert.GetNamespace()+"/"+cert.GetName()))
				injectCA(o, crt)
			case o.GetKind() == "Deployment":
				deployment = o
				tellAPIServer(o, api)
			}
			apply(o)
			if o.GetKind() == "Namespace" && o.GetName() == cert.GetNamespace() {
				Expect(k8sClient.Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: cert.GetNamespace()},
					Type:       corev1.SecretTypeTLS,
					Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key, "ca.crt": crt},
				})).To(Succeed())
			}
		}
		Expect(deployment).NotTo(BeNil())
	})

	It("has its Deployment available: both pods on the real node, from the image imported there, admitted as restricted", func() {
		var d appsv1.Deployment
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "torus-operator"}, &d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(2), "two replicas serve the webhooks")
		}, timeout, interval).Should(Succeed())
		var ns corev1.Namespace
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: installNS}, &ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", restrictedPods))
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(installNS), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
		Expect(pods.Items).To(HaveLen(2))
		for _, pod := range pods.Items {
			Expect(pod.Spec.NodeName).To(Equal("real-node-0"))
			Expect(pod.Status.ContainerStatuses).To(ConsistOf(And(
				HaveField("Ready", true), HaveField("Image", bundleCSV().Spec.RelatedImages[0].Image))))
		}
	})

	It("serves its webhooks from its pods and runs a job to Complete on real pods", func() {
		By("a bad job refused by the webhook the pods serve, with its reason")
		expectBadJobRefused()

		By("an Open MPI job reconciled by the elected pod, run to Complete by real sshd and mpirun")
		runPi("pi-kustomize")

		By("a training's pods pointed at the status endpoint through the webhooks' Service and CA, as the installed configuration names them")
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "torus-validating-webhook-configuration"}, &vwc)).To(Succeed())
		var url string
		var ca []byte
		for _, h := range vwc.Webhooks {
			if h.Name == "vtrainjob.torus-mpi.io" {
				svc := h.ClientConfig.Service
				url = fmt.Sprintf("https://%s.%s.svc:%d", svc.Name, svc.Namespace, ptr.Deref(svc.Port, 443))
				ca = h.ClientConfig.CABundle
			}
		}
		Expect(url).NotTo(BeEmpty(), "the configuration has no webhook vtrainjob.torus-mpi.io")
		expectStatusWiring("progress-kustomize", url, string(ca))
	})

	It("uninstalls as docs/admins/install.md says, keeping the CRDs and so the users' jobs", func() {
		// The webhook configurations first: they refuse TrainJob changes
		// once the operator is gone. The CRDs stay.
		webhooks := func(o *unstructured.Unstructured) bool { return strings.HasSuffix(o.GetKind(), "WebhookConfiguration") }
		for _, first := range []bool{true, false} {
			for _, o := range objs {
				switch {
				case webhooks(o) != first, o.GetKind() == "CustomResourceDefinition", o.GetKind() == "Namespace",
					o.GroupVersionKind().Group == "cert-manager.io":
					continue
				}
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed(), "deleting %s %s", o.GetKind(), o.GetName())
			}
		}
		Expect(k8sClient.DeleteAllOf(ctx, &trainer.ClusterTrainingRuntime{}, client.MatchingLabels{"torus-mpi.io/default-runtime": "true"})).To(Succeed())
		deleteNamespace(installNS)
		var validating admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(k8sClient.List(ctx, &validating)).To(Succeed())
		Expect(validating.Items).NotTo(ContainElement(HaveField("ObjectMeta.Name", HavePrefix("torus-"))))
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				Expect(k8sClient.Get(ctx, client.ObjectKey{Name: o.GetName()}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
			}
		}
	})
}

// tellAPIServer gives a Deployment's manager container the API server's
// address: the local cluster runs no kube-proxy to route the kubernetes
// Service's address to it.
func tellAPIServer(d *unstructured.Unstructured, api *url.URL) {
	GinkgoHelper()
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	Expect(err).NotTo(HaveOccurred())
	for i := range containers {
		c := containers[i].(map[string]any)
		if c["name"] != "manager" {
			continue
		}
		env, _, _ := unstructured.NestedSlice(c, "env")
		c["env"] = append(env,
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": api.Hostname()},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": api.Port()})
	}
	Expect(unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers")).To(Succeed())
}

// injectCA sets every webhook's caBundle, as cert-manager's CA injector does
// for a configuration annotated with its Certificate.
func injectCA(o *unstructured.Unstructured, ca []byte) {
	GinkgoHelper()
	hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	Expect(err).NotTo(HaveOccurred())
	Expect(hooks).NotTo(BeEmpty())
	for i := range hooks {
		h := hooks[i].(map[string]any)
		Expect(unstructured.SetNestedField(h, base64.StdEncoding.EncodeToString(ca), "clientConfig", "caBundle")).To(Succeed())
	}
	Expect(unstructured.SetNestedSlice(o.Object, hooks, "webhooks")).To(Succeed())
}

// kubectlMPI runs the plugin of this tree against the suite's cluster.
func kubectlMPI(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "bin", "kubectl-mpi"), append([]string{"--kubeconfig", filepath.Join(clusterDir, "kubeconfig")}, args...)...)
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("$ kubectl mpi %s\n%s", strings.Join(args, " "), out)
	return string(out), err
}

// expectBadJobRefused dry-runs a TrainJob of no nodes: Torus's webhook,
// wherever it is served, refuses it with its reason.
//
// Its pods Available, or its CSV Succeeded, are not yet the API server
// reaching it: the API server calls a webhook at its Service's endpoints,
// which the controller manager publishes once the pods are Ready and the
// API server then learns from its informer, as it learns of new webhook
// configurations. Until then a call fails ("failed calling webhook", no
// endpoints), or passes a configuration it has not seen yet: the dry run is
// sent until Torus's own answer comes back.
func expectBadJobRefused() {
	GinkgoHelper()
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torus-openmpi-local"}, Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](0)}}}
	Eventually(func(g Gomega) {
		err := k8sClient.Create(ctx, tj.DeepCopy(), client.DryRunAll)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid from Torus's webhook, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.trainer.numNodes: Invalid value: 0: must be at least 1"))
	}, timeout, interval).Should(Succeed())
}

// runPi runs a 2-worker Open MPI job of the local runtime to Complete on the
// real node, checks its result and deletes it.
func runPi(name string) {
	GinkgoHelper()
	out, err := kubectlMPI("run", name, "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
		"--wait", "--timeout", "3m", "--", "mpirun", "-n", "4", "python3", "/opt/torus/pi.py", "200000")
	if err != nil {
		describe, _ := kubectlMPI("describe", name)
		Fail(fmt.Sprintf("the job did not complete: %v\n%s\n%s", err, out, describe))
	}
	out, err = kubectlMPI("logs", name, "--launcher")
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(out).To(MatchRegexp(`pi is 3\.14159265\d+ from 4 ranks`))
	_, err = kubectlMPI("delete", name, "--wait")
	Expect(err).NotTo(HaveOccurred())
}

// expectStatusWiring runs the reference training for two epochs and checks
// what its launcher was given to report its progress: the status
// endpoint's URL through the Service the install made, and the CA the
// install keeps. The local cluster runs no kube-proxy, so a pod cannot
// reach a Service's address here: the real-node tier has trainings report
// for real, to the operator's address on the host (test/cluster).
func expectStatusWiring(name, url, ca string) {
	GinkgoHelper()
	out, err := kubectlMPI("run", name, "--runtime", "torus-openmpi-local", "--workers", "1", "--slots-per-worker", "2",
		"--wait", "--timeout", "3m", "--", "mpirun", "-n", "2", "python3", "/opt/torus/train.py", "--epochs", "2")
	if err != nil {
		describe, _ := kubectlMPI("describe", name)
		Fail(fmt.Sprintf("the training did not complete: %v\n%s\n%s", err, out, describe))
	}
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{
		"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "launcher"})).To(Succeed())
	Expect(pods.Items).NotTo(BeEmpty(), "the launcher's pod")
	launcher := pods.Items[0]
	Expect(launcher.Annotations).To(HaveKeyWithValue(trainerstatus.AnnotationCA, ca))
	Expect(launcher.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{
		Name: trainerstatus.EnvServerURL, Value: url + trainerstatus.Path("default", name)}))
	_, err = kubectlMPI("delete", name, "--wait")
	Expect(err).NotTo(HaveOccurred())
}
