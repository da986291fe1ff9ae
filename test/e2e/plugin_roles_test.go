package e2e

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
)

// The users' roles every install ships (kustomize/userroles), aggregated by
// the cluster's own kube-controller-manager into admin, edit and view: a
// namespace's editor runs jobs with kubectl mpi, its viewer only looks.
var _ = Describe("kubectl mpi for a namespace's editors and viewers", Ordered, func() {
	var ns string
	tokens := map[string]string{}

	BeforeAll(func() {
		installSampleRuntimes()
		objs, err := render.Objects(filepath.Join(framework.RepoRoot(), "kustomize", "userroles"))
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			Expect(k8sClient.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed()) })
		}
		ns = newNamespace("roles")
		for _, role := range []string{"admin", "edit", "view"} {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: role + "-user", Namespace: ns}}
			Expect(k8sClient.Create(ctx, sa)).To(Succeed())
			Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: sa.Name, Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
			})).To(Succeed())
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(600)}}
			Expect(k8sClient.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
			tokens[role] = tr.Status.Token
		}
		// The aggregation controller fills edit and view in the background,
		// each from several roles, in as many updates; the API server's
		// authorizer reads roles and bindings from caches of its own, the
		// cluster-wide catalog's binding from another than the namespace's.
		// A token that lists TrainJobs proves only part of that: wait for
		// what the editor's and the viewer's commands below do.
		uses := []access{
			{"edit", "get", "trainer.kubeflow.org", "clustertrainingruntimes", false, true},
			{"edit", "create", "trainer.kubeflow.org", "trainjobs", true, true},
			{"edit", "delete", "trainer.kubeflow.org", "trainjobs", true, true},
			{"edit", "get", "jobset.x-k8s.io", "jobsets", true, true},
			{"view", "get", "trainer.kubeflow.org", "clustertrainingruntimes", false, true},
			{"view", "get", "trainer.kubeflow.org", "trainjobs", true, true},
			{"view", "get", "jobset.x-k8s.io", "jobsets", true, true},
		}
		Eventually(func(g Gomega) {
			for _, role := range []string{"edit", "view"} {
				r := mpiCmd("-n", ns, "--token", tokens[role], "list")
				g.Expect(r.Code).To(BeZero(), "the %s role lets its holder list TrainJobs: %s", role, r.Stderr)
			}
			for _, a := range uses {
				a.check(g, ns)
			}
		}, timeout, interval).Should(Succeed())
	})

	as := func(role string, args ...string) result {
		return mpiCmd(append([]string{"-n", ns, "--token", tokens[role]}, args...)...)
	}

	It("grants each role what the API server's SubjectAccessReviews say, and no more", func() {
		cases := []access{
			{"admin", "create", "trainer.kubeflow.org", "trainingruntimes", true, true},
			{"edit", "create", "trainer.kubeflow.org", "trainjobs", true, true},
			{"edit", "delete", "trainer.kubeflow.org", "trainjobs", true, true},
			{"edit", "create", "trainer.kubeflow.org", "trainingruntimes", true, false},
			{"edit", "get", "jobset.x-k8s.io", "jobsets", true, true},
			{"edit", "create", "jobset.x-k8s.io", "jobsets", true, false},
			{"edit", "create", "trainer.kubeflow.org", "clustertrainingruntimes", false, false},
			{"view", "list", "trainer.kubeflow.org", "trainjobs", true, true},
			{"view", "get", "kueue.x-k8s.io", "workloads", true, true},
			{"view", "create", "trainer.kubeflow.org", "trainjobs", true, false},
			{"view", "get", "trainer.kubeflow.org", "clustertrainingruntimes", false, true},
			{"view", "list", "torus-mpi.io", "mpinetworkprofiles", false, true},
		}
		// The aggregation controller fills the roles in the background.
		Eventually(func(g Gomega) {
			for _, tc := range cases {
				tc.check(g, ns)
			}
		}, timeout, interval).Should(Succeed())
	})

	It("lets an editor run a job, see it, read its logs, reach a rank and delete it", func() {
		succeed(as("edit", "run", "pi", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "1", "--", "mpirun", "./pi"))
		Expect(succeed(as("edit", "list")).Stdout).To(ContainSubstring("pi"))
		Expect(succeed(as("edit", "describe", "pi")).Stdout).To(ContainSubstring("torus-openmpi-long"))
		Eventually(condition(trainJobRef(ns, "pi"), trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		succeed(as("edit", "logs", "pi", "--launcher"))
		Expect(succeed(as("edit", "exec-rank", "-q", "pi", "0", "--", "sh", "-c", "echo reached")).Stdout).To(Equal("reached\n"))
		succeed(as("edit", "delete", "pi", "--wait"))
	})

	It("lets a viewer see jobs and logs, and tells them they may not run one, reach a rank or delete it", func() {
		succeed(mpiCmd("-n", ns, "run", "seen", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "1", "--", "mpirun", "./pi"))
		Expect(succeed(as("view", "list")).Stdout).To(ContainSubstring("seen"))
		succeed(as("view", "describe", "seen"))
		Eventually(condition(trainJobRef(ns, "seen"), trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		succeed(as("view", "logs", "seen", "--launcher"))
		r := as("view", "exec-rank", "seen", "0", "--", "true")
		Expect(r.Code).To(Equal(1))
		// exec is a GET upgraded to a stream (websocket).
		Expect(r.Stderr).To(MatchRegexp(`is forbidden: .* cannot (get|create) resource "pods/exec"`))
		r = as("view", "run", "x", "--image", "img", "--runtime", "torus-openmpi-long", "--", "mpirun", "./pi")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring(`cannot create resource "trainjobs"`))
		r = as("view", "delete", "seen")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring(`cannot delete resource "trainjobs"`))
	})
})

// access is whether the holder of a role, bound in a namespace, may do a
// verb on a resource.
type access struct {
	role, verb, group, resource string
	namespaced, allowed         bool
}

// check asks the API server's authorizer, which the commands' requests
// meet, whether the role's ServiceAccount in ns may do what a says.
func (a access) check(g Gomega, ns string) {
	attrs := &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource}
	if a.namespaced {
		attrs.Namespace = ns
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: framework.ServiceAccountReview(ns, a.role+"-user")}
	sar.Spec.ResourceAttributes = attrs
	g.Expect(k8sClient.Create(ctx, sar)).To(Succeed())
	g.Expect(sar.Status.Allowed).To(Equal(a.allowed), "%s may %s %s.%s: %s", a.role, a.verb, a.resource, a.group, sar.Status.Reason)
}
