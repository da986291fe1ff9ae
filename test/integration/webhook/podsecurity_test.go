package webhook_test

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/framework"
)

// The pods Torus makes from each default runtime, as shipped: admitted by
// the API server's own PodSecurity admission at the restricted level, and
// by OpenShift's SCC admission code under restricted-v2 (no UID fixed, so
// that the SCC assigns one; no privilege, no capability).
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
				verdict, err := framework.JudgeSCCOne(&spec)
				Expect(err).NotTo(HaveOccurred())
				Expect(verdict).To(Equal(framework.SCCVerdict{SCC: "restricted-v2"}), "%s pods of %s under OpenShift's SCC admission", rj.Name, name)
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
		verdict, err := framework.JudgeSCCOne(&pod.Spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(verdict.Refusal).To(ContainSubstring(`provider restricted-v2: .containers[0].capabilities.add: Invalid value: "IPC_LOCK": capability may not be added`))
	})
})

// restrictedNamespace is a namespace whose pods the API server admits only
// at the restricted Pod Security level.
func restrictedNamespace(sctx SpecContext) *corev1.Namespace {
	GinkgoHelper()
	return fw.NewLabelledNamespace(sctx, "pss", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
}

// The operator's own pod, as each kustomize overlay and the OLM bundle
// deploy it: admitted by PodSecurity at the restricted level and by
// OpenShift's SCC admission code under restricted-v2.
var _ = Describe("The operator's pod", func() {
	specs := func() map[string]*corev1.PodSpec {
		GinkgoHelper()
		root := framework.RepoRoot()
		out := map[string]*corev1.PodSpec{}
		for _, name := range append([]string{render.Base}, render.Overlays...) {
			objs, err := render.Objects(render.Path(root, name))
			Expect(err).NotTo(HaveOccurred(), "rendering %s", name)
			for _, o := range objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				var d appsv1.Deployment
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d)).To(Succeed())
				out["kustomize "+name+": "+d.Name] = &d.Spec.Template.Spec
			}
		}
		csvs, err := render.DecodeFile(filepath.Join(root, "bundle", "manifests", "torus-operator.clusterserviceversion.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, o := range csvs {
			var csv operatorsv1alpha1.ClusterServiceVersion
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &csv)).To(Succeed())
			for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
				out["bundle: "+d.Name] = &d.Spec.Template.Spec
			}
		}
		Expect(out).To(HaveLen(len(render.Overlays) + 2))
		return out
	}

	It("meets the restricted Pod Security Standard and restricted-v2, from every overlay and the bundle", func(sctx SpecContext) {
		pods := specs()
		verdicts, err := framework.JudgeSCC(pods)
		Expect(err).NotTo(HaveOccurred())
		ns := restrictedNamespace(sctx)
		for name, spec := range pods {
			Expect(verdicts[name]).To(Equal(framework.SCCVerdict{SCC: "restricted-v2"}), "%s under OpenShift's SCC admission", name)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "torus-operator-", Namespace: ns.Name}, Spec: *spec}
			Expect(fw.Client.Create(sctx, pod, client.DryRunAll)).To(Succeed(), "%s under PodSecurity enforce=restricted", name)
		}
	})
})
