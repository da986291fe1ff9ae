package olm

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/test/framework"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

const (
	olmNamespace   = "olm"
	catalogName    = "torus-catalog"
	installNS      = "torus-system"
	brokenNS       = "torus-broken"
	ownerLabel     = "olm.owner"
	restrictedPods = "restricted"
)

func operatorHub() {
	var torusCSV, brokenCSV string

	BeforeAll(func() {
		By("installing OLM's CRDs from the pinned module")
		olmDir := moduleDirIn(filepath.Join(root, "hack", "testbin", "olm"), "github.com/operator-framework/operator-lifecycle-manager")
		files, err := filepath.Glob(filepath.Join(olmDir, "deploy", "chart", "crds", "0000_50_olm_00-*.crd.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			objs, err := render.DecodeFile(f)
			Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				apply(o)
			}
		}
		Eventually(func(g Gomega) {
			var crds apiextensionsv1.CustomResourceDefinitionList
			g.Expect(k8sClient.List(ctx, &crds)).To(Succeed())
			n := 0
			for _, c := range crds.Items {
				if c.Spec.Group == "operators.coreos.com" && established(&c) {
					n++
				}
			}
			g.Expect(n).To(BeNumerically(">=", len(files)))
		}, timeout, interval).Should(Succeed())
		namespace(olmNamespace, nil)

		By("starting olm-operator and catalog-operator; 127.0.0.1:8080 is held so that neither opens :8080 on every address")
		if l, err := net.Listen("tcp", "127.0.0.1:8080"); err == nil {
			DeferCleanup(l.Close)
		} else {
			GinkgoWriter.Printf("127.0.0.1:8080 is already taken (%v): OLM cannot open :8080 either\n", err)
		}
		kubeconfig := filepath.Join(clusterDir, "kubeconfig")
		olm := start("olm-operator", []string{"OPERATOR_NAMESPACE=" + olmNamespace, "OPERATOR_NAME=olm-operator", "KUBECONFIG=" + kubeconfig},
			filepath.Join(testbin, "olm"), "--namespace", olmNamespace, "--interval", "30s")
		catalogOp := start("catalog-operator", nil,
			filepath.Join(testbin, "catalog"), "--namespace", olmNamespace, "--kubeconfig", kubeconfig, "--interval", "30s")

		By("generating a file-based catalog from bundle/ with opm, and validating it")
		catalogDir := filepath.Join(workDir, "catalog")
		torusCSV, brokenCSV = buildCatalog(catalogDir)

		By("serving it on 127.0.0.1 only")
		server, ports := runComponent(supervisor.Component{
			Name: "catalog-server", Ports: 1,
			Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
				return supervisor.Spec{Argv: []string{filepath.Join(testbin, "catalog-server"),
					"-catalog", catalogDir, "-listen", fmt.Sprintf("127.0.0.1:%d", p[0])}}, nil
			},
			Ready: func(context.Context, []int) error { return nil }, // listening is enough: OLM reports READY below
		})
		port := ports[0]
		cs := &operatorsv1alpha1.CatalogSource{
			ObjectMeta: metav1.ObjectMeta{Name: catalogName, Namespace: olmNamespace},
			Spec: operatorsv1alpha1.CatalogSourceSpec{
				SourceType:  operatorsv1alpha1.SourceTypeGrpc,
				Address:     fmt.Sprintf("127.0.0.1:%d", port),
				DisplayName: "Torus test catalog",
				Publisher:   "Torus project",
			},
		}
		Expect(k8sClient.Create(ctx, cs)).To(Succeed())
		Eventually(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cs), cs)).To(Succeed())
			g.Expect(cs.Status.GRPCConnectionState).NotTo(BeNil())
			return cs.Status.GRPCConnectionState.LastObservedState
		}, timeout, interval).Should(Equal("READY"))

		for _, p := range []*supervisor.Process{olm, catalogOp, server} {
			Expect(p.Exited()).To(BeFalse(), "%s exited; see %s", p.Name, p.Log)
			loopbackOnly(p)
		}
	})

	It("refuses a broken bundle with OLM's reason", func() {
		namespace(brokenNS, map[string]string{"pod-security.kubernetes.io/enforce": restrictedPods})
		subscribe(brokenNS, brokenPackage)
		csv := &operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: brokenCSV, Namespace: brokenNS}}
		// A CSV that fails to install cycles Failed → Pending → Failed:
		// the first Failed, with its reason, is the answer.
		Eventually(func(g Gomega) operatorsv1alpha1.ClusterServiceVersionPhase {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(csv), csv)).To(Succeed())
			return csv.Status.Phase
		}, timeout, interval).Should(Equal(operatorsv1alpha1.CSVPhaseFailed))
		GinkgoWriter.Printf("OLM: %s %s: %s\n", csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
		Expect(csv.Status.Reason).To(Equal(operatorsv1alpha1.CSVReasonComponentFailed))
		Expect(csv.Status.Message).To(ContainSubstring("must be less than or equal to cpu limit"))

		By("removing the broken operator as docs/admins/install.md says: Subscription, CSV, then its namespace")
		uninstall(brokenNS, brokenPackage, brokenCSV)
		deleteNamespace(brokenNS)
	})

	It("installs the bundle the way OperatorHub does: CatalogSource, OperatorGroup, Subscription, InstallPlan, CSV Succeeded", func() {
		// The install namespace enforces the restricted Pod Security
		// Standard: the operator's pod is admitted under it, or the CSV
		// never succeeds.
		namespace(installNS, map[string]string{"pod-security.kubernetes.io/enforce": restrictedPods})
		started := time.Now()
		subscribe(installNS, torusPackage)
		csv := &operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: torusCSV, Namespace: installNS}}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(csv), csv)).To(Succeed())
			g.Expect(csv.Status.Phase).NotTo(Equal(operatorsv1alpha1.CSVPhaseFailed), "%s: %s", csv.Status.Reason, csv.Status.Message)
			g.Expect(csv.Status.Phase).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded), "%s: %s", csv.Status.Reason, csv.Status.Message)
		}, timeout, interval).Should(Succeed())
		GinkgoWriter.Printf("CSV %s Succeeded %.1fs after the Subscription\n", torusCSV, time.Since(started).Seconds())

		By("one InstallPlan, Complete, with JobSet resolved as the required dependency")
		// The plan reports Complete once every step has, which can trail
		// the CSV by a resync.
		Eventually(func(g Gomega) {
			var plans operatorsv1alpha1.InstallPlanList
			g.Expect(k8sClient.List(ctx, &plans, client.InNamespace(installNS))).To(Succeed())
			var names []string
			for _, p := range plans.Items {
				g.Expect(p.Status.Phase).To(Equal(operatorsv1alpha1.InstallPlanPhaseComplete), "InstallPlan %s", p.Name)
				names = append(names, p.Spec.ClusterServiceVersionNames...)
			}
			g.Expect(names).To(ContainElements(torusCSV, jobsetCSV))
		}, timeout, interval).Should(Succeed())
		jobset := &operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: jobsetCSV, Namespace: installNS}}
		Eventually(func(g Gomega) operatorsv1alpha1.ClusterServiceVersionPhase {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(jobset), jobset)).To(Succeed())
			return jobset.Status.Phase
		}, timeout, interval).Should(Equal(operatorsv1alpha1.CSVPhaseSucceeded))

		strategy := bundleCSV().Spec.InstallStrategy.StrategySpec
		sa := strategy.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName
		owned := client.MatchingLabels{ownerLabel: torusCSV}

		By("the CRDs")
		for _, crd := range bundleCRDs() {
			var got apiextensionsv1.CustomResourceDefinition
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crd.GetName()}, &got)).To(Succeed())
			Expect(established(&got)).To(BeTrue(), "CRD %s", crd.GetName())
		}

		By("the ServiceAccount and exactly the CSV's RBAC, bound to it")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: sa}, &corev1.ServiceAccount{})).To(Succeed())
		var crs rbacv1.ClusterRoleList
		Expect(k8sClient.List(ctx, &crs, owned)).To(Succeed())
		Expect(crs.Items).To(ContainElement(HaveField("Rules", ConsistOf(strategy.ClusterPermissions[0].Rules))))
		var crbs rbacv1.ClusterRoleBindingList
		Expect(k8sClient.List(ctx, &crbs, owned)).To(Succeed())
		Expect(crbs.Items).To(ContainElement(HaveField("Subjects", ContainElement(HaveField("Name", sa)))))
		var roles rbacv1.RoleList
		Expect(k8sClient.List(ctx, &roles, client.InNamespace(installNS), owned)).To(Succeed())
		Expect(roles.Items).To(ContainElement(HaveField("Rules", ConsistOf(strategy.Permissions[0].Rules))))
		var rbs rbacv1.RoleBindingList
		Expect(k8sClient.List(ctx, &rbs, client.InNamespace(installNS), owned)).To(Succeed())
		Expect(rbs.Items).To(ContainElement(HaveField("Subjects", ContainElement(HaveField("Name", sa)))))

		By("the Deployment, available, its pod admitted as restricted, with OLM's webhook certificate mounted")
		var d appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "torus-operator"}, &d)).To(Succeed())
		Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(2), "two replicas serve the webhooks")
		verdict, err := framework.JudgeSCCOne(&d.Spec.Template.Spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(verdict).To(Equal(framework.SCCVerdict{SCC: "restricted-v2"}), "OpenShift's SCC admission")
		Expect(d.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(
			HaveField("MountPath", "/tmp/k8s-webhook-server/serving-certs")))
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(installNS), client.MatchingLabels{"app.kubernetes.io/name": "torus"})).To(Succeed())
		Expect(pods.Items).To(ContainElement(HaveField("Status.Phase", corev1.PodRunning)))
		if realNode {
			By("the pod on the real node, from the image of this tree's binary, Ready")
			Expect(pods.Items).To(HaveLen(2))
			for _, pod := range pods.Items {
				Expect(pod.Spec.NodeName).To(Equal("real-node-0"))
				Expect(pod.Status.ContainerStatuses).To(ConsistOf(And(
					HaveField("Ready", true), HaveField("Image", bundleCSV().Spec.RelatedImages[0].Image))))
			}
		}

		By("the PodDisruptionBudget that keeps a webhook replica through node drains")
		var pdb policyv1.PodDisruptionBudget
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "torus-operator"}, &pdb)).To(Succeed())
		Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(1))
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))

		By("the webhook Service, its certificate Secret and every webhook of the CSV")
		var svc corev1.Service
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "torus-operator-service"}, &svc)).To(Succeed())
		Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Port", BeEquivalentTo(443)), HaveField("TargetPort.IntVal", BeEquivalentTo(9443)))))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "torus-operator-service-cert"}, &corev1.Secret{})).To(Succeed())
		hooks := map[string]string{}
		var mutating admissionregistrationv1.MutatingWebhookConfigurationList
		Expect(k8sClient.List(ctx, &mutating, owned)).To(Succeed())
		for _, c := range mutating.Items {
			for _, h := range c.Webhooks {
				Expect(h.ClientConfig.CABundle).NotTo(BeEmpty())
				hooks[h.Name] = *h.ClientConfig.Service.Path
			}
		}
		var validating admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(k8sClient.List(ctx, &validating, owned)).To(Succeed())
		for _, c := range validating.Items {
			for _, h := range c.Webhooks {
				Expect(h.ClientConfig.CABundle).NotTo(BeEmpty())
				hooks[h.Name] = *h.ClientConfig.Service.Path
			}
		}
		want := map[string]string{}
		for _, w := range bundleCSV().Spec.WebhookDefinitions {
			want[w.GenerateName] = *w.WebhookPath
		}
		Expect(hooks).To(Equal(want))
	})

	It("serves its webhooks from its pod and runs a job to Complete on real pods, pointed at its status endpoint", func() {
		if !realNode {
			framework.SkipRootTier("no real node on this machine: the operator's pod only runs on a kwok node")
		}
		By("a bad job refused by the webhook the pod serves, with its reason")
		expectBadJobRefused()

		By("an Open MPI job reconciled by the pod, run to Complete by real sshd and mpirun on the real node")
		runPi("pi-olm")

		By("a training's pods pointed at the status endpoint through the Service and the CA that OLM made for the webhooks")
		var cert corev1.Secret
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "torus-operator-service-cert"}, &cert)).To(Succeed())
		Expect(cert.Data["olmCAKey"]).NotTo(BeEmpty())
		expectStatusWiring("progress-olm", "https://torus-operator-service."+installNS+".svc:443", string(cert.Data["olmCAKey"]))
	})

	It("uninstalls as docs/admins/install.md says, keeping the CRDs and so the users' jobs", func() {
		uninstall(installNS, torusPackage, torusCSV)
		Eventually(func(g Gomega) {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "torus-operator"}, &appsv1.Deployment{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Deployment is still there")
			var validating admissionregistrationv1.ValidatingWebhookConfigurationList
			g.Expect(k8sClient.List(ctx, &validating, client.MatchingLabels{ownerLabel: torusCSV})).To(Succeed())
			g.Expect(validating.Items).To(BeEmpty())
			var mutating admissionregistrationv1.MutatingWebhookConfigurationList
			g.Expect(k8sClient.List(ctx, &mutating, client.MatchingLabels{ownerLabel: torusCSV})).To(Succeed())
			g.Expect(mutating.Items).To(BeEmpty())
		}, timeout, interval).Should(Succeed())
		for _, crd := range bundleCRDs() {
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crd.GetName()}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
		}
	})
}

// subscribe creates an AllNamespaces OperatorGroup and a Subscription to a
// package of the test catalog in ns, approved automatically.
func subscribe(ns, pkg string) {
	GinkgoHelper()
	og := &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "torus", Namespace: ns}}
	if err := k8sClient.Create(ctx, og); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	sub := &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: pkg, Namespace: ns},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource:          catalogName,
			CatalogSourceNamespace: olmNamespace,
			Package:                pkg,
			Channel:                "candidate",
			InstallPlanApproval:    operatorsv1alpha1.ApprovalAutomatic,
		},
	}
	if realNode {
		// The local cluster runs no kube-proxy: pods reach the API server
		// at its own address, which the kubelet's service variables do not
		// name. OLM passes the Subscription's env to the operator's pod.
		api, err := url.Parse(adminCfg.Host)
		Expect(err).NotTo(HaveOccurred())
		sub.Spec.Config = &operatorsv1alpha1.SubscriptionConfig{Env: []corev1.EnvVar{
			{Name: "KUBERNETES_SERVICE_HOST", Value: api.Hostname()},
			{Name: "KUBERNETES_SERVICE_PORT", Value: api.Port()},
		}}
	}
	Expect(k8sClient.Create(ctx, sub)).To(Succeed())
}

// uninstall deletes a Subscription and its CSV, and waits for the CSV to go.
func uninstall(ns, pkg, csvName string) {
	GinkgoHelper()
	sub := &operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: pkg, Namespace: ns}}
	csv := &operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: csvName, Namespace: ns}}
	// The catalog-operator may still hold the Subscription, or an
	// InstallPlan, in its cache when the CSV goes, and put the CSV back
	// (seen with a CSV that failed to install): delete again until it stays
	// gone, as an admin would.
	Eventually(func(g Gomega) {
		g.Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, sub))).To(Succeed())
		g.Expect(client.IgnoreNotFound(k8sClient.DeleteAllOf(ctx, &operatorsv1alpha1.InstallPlan{}, client.InNamespace(ns)))).To(Succeed())
		g.Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, csv))).To(Succeed())
		g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(csv), csv))).To(BeTrue(), "CSV %s is not deleted", csvName)
	}, timeout, 2*time.Second).Should(Succeed())
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}

// moduleDirIn locates a module of a helper module's build list.
func moduleDirIn(dir, module string) string {
	GinkgoHelper()
	d, err := repo.ModuleDir(module, dir)
	Expect(err).NotTo(HaveOccurred())
	return d
}
