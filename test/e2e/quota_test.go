package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// A namespace's ResourceQuota refuses a job's pods: the real API server
// refuses them, the real Job controller records it on its Job, and the
// TrainJob says so, with the quota's words and the fix.
var _ = Describe("A job whose pods a ResourceQuota refuses", func() {
	It("says so on the TrainJob and in describe, in the quota's words", func() {
		ns := newNamespace("quota")
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
		}
		Expect(k8sClient.Create(ctx, quota)).To(Succeed())
		// Until the quota controller fills in what the quota holds, the API
		// server refuses every pod it counts with "status unknown for
		// quota", not with the quota's words, and the Job controller backs
		// off before it tries again.
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
			g.Expect(quota.Status.Hard).To(HaveKey(corev1.ResourcePods))
		}, timeout, interval).Should(Succeed())
		tj := wrappers.MakeTrainJob("squeezed", ns).RuntimeRef("torus-openmpi-e2e").NumNodes(3).Obj()
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())

		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", ContainSubstring("workers QuotaExceeded: the Job controller cannot create the pods of Job squeezed-node-0")),
			HaveField("Message", ContainSubstring("exceeded quota: team")),
			HaveField("Message", ContainSubstring("ask your admin for more quota")),
		))
		r := succeed(mpiCmd("-n", ns, "describe", "squeezed"))
		Expect(r.Stdout).To(ContainSubstring("workers QuotaExceeded"))
	})
})

var _ = Describe("Before a job is submitted", func() {
	It("run says what it asks against what its queue and its namespace's quota have free now", func() {
		ns := newNamespace("fit")
		queue := newQueue(ns, 8)
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: ns},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("1")}}}
		Expect(k8sClient.Create(ctx, quota)).To(Succeed())
		// The quota controller fills in what the quota holds.
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
			g.Expect(quota.Status.Hard).To(HaveKey(corev1.ResourceName("requests.cpu")))
		}, time.Minute, time.Second).Should(Succeed())

		r := succeed(mpiCmd("-n", ns, "run", "fits", "--image", "img", "--runtime", "torus-openmpi-e2e", "--workers", "2",
			"--gpus", "4", "--cpu", "1", "--queue", queue, "--dry-run=server", "--", "mpirun", "./a"))
		Expect(r.Stderr).To(ContainSubstring("Note: the job asks"))
		// The LocalQueue points at a ClusterQueue named after the namespace.
		Expect(r.Stderr).To(MatchRegexp(`8 nvidia\.com/gpu in all; ClusterQueue "%s" has [^;]*8 nvidia\.com/gpu free now`, ns))
		Expect(r.Stderr).To(ContainSubstring("it fits now"))
		Expect(r.Stderr).To(ContainSubstring(`Note: ResourceQuota "small" of namespace ` + ns + ` would refuse some of the job's pods now (requests.cpu: the job asks`))
	})
})
