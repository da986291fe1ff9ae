package olm

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/hack/bundle/rbaccheck"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/operator/runtimes"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// lpNamespace plays the namespace OLM would install the operator into.
const lpNamespace = "torus-lp"

// The default runtimes the operator installs; kwok runs their launchers for
// this long, so a job's Secret can be seen before the job completes.
const launcherRun = "6s"

var sampleRuntimes = []string{"torus-openmpi", "torus-openmpi5", "torus-intelmpi", "torus-mpich", "torus-python"}

func leastPrivilege() {
	var (
		csv      *operatorsv1alpha1.ClusterServiceVersion
		operator *supervisor.Process
		metrics  int
		saUser   string
	)

	BeforeAll(func() {
		csv = bundleCSV()
		strategy := csv.Spec.InstallStrategy.StrategySpec
		Expect(strategy.DeploymentSpecs).To(HaveLen(1))
		Expect(strategy.ClusterPermissions).To(HaveLen(1))
		Expect(strategy.Permissions).To(HaveLen(1))
		sa := strategy.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName
		saUser = "system:serviceaccount:" + lpNamespace + ":" + sa

		By("installing the bundle's CRDs")
		for _, crd := range bundleCRDs() {
			apply(crd)
		}

		By("granting the CSV's permissions, and only those, to its ServiceAccount " + saUser)
		namespace(lpNamespace, nil)
		DeferCleanup(deleteNamespace, lpNamespace)
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: lpNamespace}})).To(Succeed())
		subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: lpNamespace}}
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: lpNamespace + "-operator"}, Rules: strategy.ClusterPermissions[0].Rules}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}}
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "torus-operator", Namespace: lpNamespace}, Rules: strategy.Permissions[0].Rules}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "torus-operator", Namespace: lpNamespace}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
		for _, o := range []client.Object{cr, crb, role, rb} {
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
		}
		DeferCleanup(func() {
			for _, o := range []client.Object{crb, cr} {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
			}
		})
		// The API server's RBAC authorizer reads roles and bindings from
		// its informers: an operator started at once would be refused its
		// first requests, which the last spec counts as a permission the
		// CSV lacks.
		waitGranted(lpNamespace, sa, "", strategy.ClusterPermissions[0].Rules)
		waitGranted(lpNamespace, sa, lpNamespace, strategy.Permissions[0].Rules)

		By("writing a kubeconfig with a token of that ServiceAccount (TokenRequest)")
		tr, err := clientset.CoreV1().ServiceAccounts(lpNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		kc := clientcmdapi.NewConfig()
		kc.Clusters["local"] = &clientcmdapi.Cluster{Server: adminCfg.Host, CertificateAuthorityData: adminCfg.CAData}
		kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
		kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "operator", Namespace: lpNamespace}
		kc.CurrentContext = "operator"
		kubeconfig := filepath.Join(workDir, "operator.kubeconfig")
		Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())

		By("running the operator binary as that ServiceAccount, with the CSV's arguments and webhooks, on 127.0.0.1")
		certDir := filepath.Join(workDir, "webhook-certs")
		ca := servingCert(certDir)
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: lpNamespace + "-mutating"}}
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: lpNamespace + "-validating"}}
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, mutating))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, validating))).To(Succeed())
		})
		var ports []int
		operator, ports = runComponent(supervisor.Component{
			Name: "torus-operator", Ports: 3, // webhook, health, metrics
			Command: func(ctx context.Context, p []int) (supervisor.Spec, error) {
				// The CSV's webhooks, pointed at this attempt's port.
				mutating.Webhooks, validating.Webhooks = nil, nil
				for _, w := range csv.Spec.WebhookDefinitions {
					url := fmt.Sprintf("https://127.0.0.1:%d%s", p[0], *w.WebhookPath)
					cc := admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
					switch w.Type {
					case operatorsv1alpha1.MutatingAdmissionWebhook:
						h := w.GetMutatingWebhook(lpNamespace, nil, ca)
						h.ClientConfig = cc
						mutating.Webhooks = append(mutating.Webhooks, h)
					case operatorsv1alpha1.ValidatingAdmissionWebhook:
						h := w.GetValidatingWebhook(lpNamespace, nil, ca)
						h.ClientConfig = cc
						validating.Webhooks = append(validating.Webhooks, h)
					}
				}
				for _, o := range []client.Object{mutating, validating} {
					// A restart on other ports replaces the first attempt's.
					if err := client.IgnoreNotFound(k8sClient.Delete(ctx, o)); err != nil {
						return supervisor.Spec{}, err
					}
					o.SetResourceVersion("")
					if err := k8sClient.Create(ctx, o); err != nil {
						return supervisor.Spec{}, err
					}
				}
				args := withFlags(strategy.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Args, map[string]string{
					// The pod's own ports, moved to loopback ports on this machine.
					"--webhook-host":              "127.0.0.1",
					"--webhook-port":              fmt.Sprint(p[0]),
					"--health-probe-bind-address": fmt.Sprintf("127.0.0.1:%d", p[1]),
					"--metrics-bind-address":      fmt.Sprintf("127.0.0.1:%d", p[2]),
					"--webhook-cert-dir":          certDir,
					// In a pod this is read from the ServiceAccount's mount.
					"--leader-election-namespace": lpNamespace,
					// In a pod, the operator reads its image from its pod.
					"--launch-image": strategy.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Image,
				})
				return supervisor.Spec{Argv: append([]string{filepath.Join(workDir, "torus-operator")}, args...),
					Env: []string{"KUBECONFIG=" + kubeconfig}}, nil
			},
			Ready: func(ctx context.Context, p []int) error {
				return supervisor.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p[1]), nil, "")
			},
		})
		metrics = ports[2]
	})

	It("holds no wildcard and no Secret access beyond what it needs", func() {
		strategy := csv.Spec.InstallStrategy.StrategySpec
		Expect(rbaccheck.Violations("clusterPermissions", strategy.ClusterPermissions[0].Rules)).To(BeEmpty())
		Expect(rbaccheck.Violations("permissions", strategy.Permissions[0].Rules)).To(BeEmpty())

		can := func(verb, group, res, ns string) bool {
			GinkgoHelper()
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: saUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + lpNamespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: res, Namespace: ns},
			}}
			Expect(k8sClient.Create(ctx, sar)).To(Succeed())
			return sar.Status.Allowed
		}
		By("the API server allows what the operator does")
		Expect(can("create", "", "secrets", "team-a")).To(BeTrue())
		Expect(can("delete", "", "secrets", "team-a")).To(BeTrue())
		Expect(can("create", "jobset.x-k8s.io", "jobsets", "team-a")).To(BeTrue())
		Expect(can("patch", "trainer.kubeflow.org", "trainjobs/status", "team-a")).To(BeTrue())
		Expect(can("update", "coordination.k8s.io", "leases", lpNamespace)).To(BeTrue())
		By("and refuses anything wider")
		Expect(can("update", "", "secrets", "team-a")).To(BeFalse(), "Secrets are immutable; the operator never updates one")
		Expect(can("patch", "", "secrets", "team-a")).To(BeFalse())
		Expect(can("update", "coordination.k8s.io", "leases", "kube-system")).To(BeFalse(), "leases only in its own namespace")
		Expect(can("create", "", "pods", "team-a")).To(BeFalse())
		Expect(can("create", "rbac.authorization.k8s.io", "clusterrolebindings", "")).To(BeFalse())
		Expect(can("create", "apiextensions.k8s.io", "customresourcedefinitions", "")).To(BeFalse())
	})

	It("authenticates as that ServiceAccount, not as an admin", func() {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(workDir, "operator.kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		ssr, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ssr.Status.UserInfo.Username).To(Equal(saUser))
		Expect(ssr.Status.UserInfo.Groups).NotTo(ContainElement("system:masters"))
	})

	It("installs the default runtimes itself, through its webhooks, with the permissions OLM grants", func() {
		for _, name := range sampleRuntimes {
			var rt trainer.ClusterTrainingRuntime
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKey{Name: name}, &rt)
			}, framework.Timeout, framework.Interval).Should(Succeed(), "the operator installs runtime %s", name)
			Expect(rt.Labels).To(HaveKeyWithValue(api.LabelDefaultRuntime, "true"))
			managers := []string{}
			for _, mf := range rt.ManagedFields {
				managers = append(managers, mf.Manager)
			}
			Expect(managers).To(ConsistOf(runtimes.FieldManager), "runtime %s is the operator's alone", name)
			// An administrator's edit: kwok plays these jobs' pods
			// (their images are not in a real node's store), also
			// beside a real node, and holds each launcher a while so
			// that a job's Secret can be seen before it completes.
			for i := range rt.Spec.Template.Spec.ReplicatedJobs {
				rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
				if rj.Name == mpi.LauncherJob {
					if rj.Template.Spec.Template.Annotations == nil {
						rj.Template.Spec.Template.Annotations = map[string]string{}
					}
					rj.Template.Spec.Template.Annotations[framework.KwokRunDuration] = launcherRun
				}
				pod := &rj.Template.Spec.Template.Spec
				pod.NodeSelector = map[string]string{"type": "kwok"}
				pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
			}
			Expect(k8sClient.Update(ctx, &rt)).To(Succeed(), "runtime %s", name)
		}
		By("and refuses a broken one with the fix in the message")
		var rt trainer.ClusterTrainingRuntime
		framework.DecodeFile(filepath.Join(root, "samples", "runtimes", "torus-openmpi.yaml"), &rt)
		rt.Name = "no-launcher"
		rt.Spec.Template.Spec.ReplicatedJobs = rt.Spec.Template.Spec.ReplicatedJobs[1:]
		err := k8sClient.Create(ctx, &rt)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("launcher"))
	})

	DescribeTable("runs an MPI job to Complete: JobSet, and Secret with SSH keys and hostfile",
		func(runtime string) {
			ns := "lp-" + strings.TrimPrefix(runtime, "torus-")
			namespace(ns, nil)
			DeferCleanup(deleteNamespace, ns)
			tj := wrappers.MakeTrainJob("pi", ns).RuntimeRef(runtime).NumNodes(2).NumProcPerNode(2).Obj()
			Expect(k8sClient.Create(ctx, tj)).To(Succeed())
			expectJobRuns(tj)
		},
		Entry("Open MPI 4", "torus-openmpi"),
		Entry("Open MPI 5", "torus-openmpi5"),
		Entry("Intel MPI", "torus-intelmpi"),
		Entry("MPICH", "torus-mpich"),
	)

	It("runs a job Kueue admits, reading its workload", func() {
		ns := "lp-queued"
		namespace(ns, nil)
		DeferCleanup(deleteNamespace, ns)
		queue := newQueue(ns)
		tj := wrappers.MakeTrainJob("pi", ns).RuntimeRef("torus-openmpi").NumNodes(2).
			Resources(corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
			}}).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: queue}
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionAdmitted), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		expectJobRuns(tj)
	})

	It("serves metrics to an authorized caller only, through TokenReview and SubjectAccessReview", func() {
		// controller-runtime serves metrics with a certificate it signs
		// itself in memory: nothing to verify it against on loopback.
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a loopback test endpoint
		get := func(token string) (int, string) {
			GinkgoHelper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics), nil)
			Expect(err).NotTo(HaveOccurred())
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			return resp.StatusCode, string(body)
		}
		code, body := get(adminCfg.BearerToken)
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("torus_trainjobs_created_total"))
		// The durations of the jobs this suite ran to Complete (their
		// namespaces are gone; the histogram keeps them).
		Expect(regexp.MustCompile(`(?m)^torus_trainjob_duration_seconds_count\{namespace="lp-openmpi",result="Succeeded"\} 1$`).MatchString(body)).
			To(BeTrue(), "the duration of the Open MPI 4 job is in the metrics")
		code, _ = get("")
		Expect(code).To(Equal(http.StatusUnauthorized))
	})

	It("keeps its leader-election lease in its own namespace", func() {
		var leases coordinationv1.LeaseList
		Expect(k8sClient.List(ctx, &leases, client.InNamespace(lpNamespace))).To(Succeed())
		Expect(leases.Items).To(ContainElement(HaveField("ObjectMeta.Name", "torus-operator.torus-mpi.io")))
	})

	It("was never refused a request", func() {
		Expect(operator.Exited()).To(BeFalse(), "the operator exited; see %s", operator.Log)
		var refused []string
		for _, l := range logLines(operator, "forbidden", "is not allowed") {
			// The specs delete a job's namespace once its keys are gone,
			// while the operator may still be sending that job's events: the
			// NamespaceLifecycle admission plugin refuses those with 403
			// Forbidden, which is no permission the CSV lacks.
			if !strings.Contains(l, "because it is being terminated") {
				refused = append(refused, l)
			}
		}
		Expect(refused).To(BeEmpty(),
			"the operator lacked a permission; fix the kubebuilder:rbac markers and run make generate bundle")
	})
}

// waitGranted waits until the API server grants ServiceAccount sa of
// namespace saNamespace every verb of every rule on every resource the
// rules name, in namespace ns ("" for the whole cluster), as it authorizes
// that ServiceAccount's token.
func waitGranted(saNamespace, sa, ns string, rules []rbacv1.PolicyRule) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for _, r := range rules {
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					resource, sub, _ := strings.Cut(res, "/")
					for _, verb := range r.Verbs {
						attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub}
						if len(r.ResourceNames) > 0 {
							attrs.Name = r.ResourceNames[0]
						}
						sar := &authorizationv1.SubjectAccessReview{Spec: framework.ServiceAccountReview(saNamespace, sa)}
						sar.Spec.ResourceAttributes = attrs
						g.Expect(k8sClient.Create(ctx, sar)).To(Succeed())
						g.Expect(sar.Status.Allowed).To(BeTrue(), "%s %s in group %q, namespace %q, not granted yet: %s", verb, res, group, ns, sar.Status.Reason)
					}
				}
			}
		}
	}, timeout, interval).Should(Succeed(), "the API server grants ServiceAccount %s/%s the CSV's permissions", saNamespace, sa)
}

// expectJobRuns follows a TrainJob through its JobSet and Secret (keys and
// hostfile) to Complete, and sees its keys deleted.
func expectJobRuns(tj *trainer.TrainJob) {
	GinkgoHelper()
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: tj.Namespace, Name: name} }
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, key(mpi.JobSetName(tj.Name)), &jobsetv1alpha2.JobSet{})).To(Succeed())
		var s corev1.Secret
		g.Expect(k8sClient.Get(ctx, key(mpi.SSHSecretName(tj.Name)), &s)).To(Succeed())
		g.Expect(s.Data).To(HaveKey(mpi.HostfileKey))
	}, timeout, interval).Should(Succeed())
	Eventually(condition(tj, trainer.TrainJobComplete), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, key(mpi.SSHSecretName(tj.Name)), &corev1.Secret{}))
	}, timeout, interval).Should(BeTrue(), "the job's keys are deleted when it completes")
}

func condition(tj *trainer.TrainJob, typ string) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		var got trainer.TrainJob
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tj), &got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "%s has no %s condition yet; conditions: %v", tj.Name, typ, got.Status.Conditions)
		return c
	}
}

// newQueue makes a ClusterQueue with room for a small job and a LocalQueue
// for it in ns, both named after ns.
func newQueue(ns string) string {
	GinkgoHelper()
	return framework.NewQueue(ctx, k8sClient, ns, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
	})
}

// withFlags replaces or adds --name=value flags in args.
func withFlags(args []string, set map[string]string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if _, ok := set[name]; !ok {
			out = append(out, a)
		}
	}
	for name, value := range set {
		out = append(out, name+"="+value)
	}
	return out
}
