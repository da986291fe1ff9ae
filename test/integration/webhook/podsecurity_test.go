package webhook_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/framework"
)

// The pods Torus makes from each default runtime, as shipped: admitted by
// the API server's own PodSecurity admission at the restricted level, and
// within the rules of OpenShift's restricted-v2 SCC (no UID fixed, so that
// the SCC assigns one; no privilege, no capability).
var _ = Describe("Pods of the default runtimes", func() {
	for _, name := range samples.RuntimeNames() {
		It("meet the restricted Pod Security Standard and restricted-v2: "+name, func(sctx SpecContext) {
			rt, err := samples.Runtime(name)
			Expect(err).NotTo(HaveOccurred())
			rt.Name = "pss-" + name
			Expect(fw.Client.Create(sctx, rt)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(fw.Client.Delete(ctx, rt)).To(Succeed()) })

			ns := restrictedNamespace(sctx)

			tj := wrappers.MakeTrainJob("pi", ns.Name).RuntimeRef(rt.Name).NumNodes(2).Obj()
			Expect(fw.Client.Create(sctx, tj)).To(Succeed())
			var js jobsetv1alpha2.JobSet
			Eventually(func() error {
				return fw.Client.Get(sctx, client.ObjectKey{Namespace: ns.Name, Name: tj.Name}, &js)
			}, framework.Timeout, framework.Interval).Should(Succeed())
			for _, rj := range js.Spec.ReplicatedJobs {
				spec := rj.Template.Spec.Template.Spec
				Expect(render.RestrictedViolations(&spec)).To(BeEmpty(), "%s pods of %s against restricted-v2", rj.Name, name)
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: rj.Name + "-", Namespace: ns.Name}, Spec: spec}
				Expect(fw.Client.Create(sctx, pod, client.DryRunAll)).To(Succeed(), "%s pods of %s under PodSecurity enforce=restricted", rj.Name, name)
			}
		})
	}

	It("are refused by PodSecurity when they could not run under restricted", func(sctx SpecContext) {
		ns := restrictedNamespace(sctx)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ipc-lock", Namespace: ns.Name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "node", Image: "img", SecurityContext: &corev1.SecurityContext{
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"IPC_LOCK"}}}}},
		}}
		err := fw.Client.Create(sctx, pod, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring(`violates PodSecurity "restricted:latest"`)))
		Expect(render.RestrictedViolations(&pod.Spec)).To(ContainElement(ContainSubstring("adds capability IPC_LOCK")))
	})
})

// restrictedNamespace is a namespace whose pods the API server admits only
// at the restricted Pod Security level.
func restrictedNamespace(sctx SpecContext) *corev1.Namespace {
	GinkgoHelper()
	ns := fw.NewNamespace(sctx, "pss")
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	Expect(fw.Client.Update(sctx, ns)).To(Succeed())
	return ns
}
