package chaos_test

import (
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/app"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

var _ = Describe("The operator's proof key rotated, then lost", func() {
	It("strands no running job: each still finishes and its keys go; a job that reported a conflict keeps it", func(sctx SpecContext) {
		const n = 10
		// The namespace opts in to per-job NetworkPolicies: a third kind
		// of child, stamped as the others.
		ns := fw.NewNamespace(sctx, "proofkey")
		patch := client.MergeFrom(ns.DeepCopy())
		metav1.SetMetaDataAnnotation(&ns.ObjectMeta, api.AnnotationNetworkPolicy, api.NetworkPolicyRestricted)
		Expect(fw.Client.Patch(ctx, ns, patch)).To(Succeed())
		keys := fw.NewNamespace(sctx, "torus-operator").Name
		op := &operatorProcess{dir: GinkgoT().TempDir(), keyNamespace: keys}
		DeferCleanup(op.stop)
		op.start()
		ensureRuntimes()
		stopObserving := observeJobSets(ns.Name)
		DeferCleanup(stopObserving)
		name := func(i int) string { return fmt.Sprintf("job-%03d", i) }

		By(fmt.Sprintf("creating %d jobs under the first key", n))
		var refused atomic.Int64
		createAll(ns.Name, n, 0, &refused)
		Eventually(func(g Gomega) {
			g.Expect(stampsOf(g, ns.Name)).To(HaveLen(3 * n))
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), "every job gets its JobSet, keys and NetworkPolicy")
		first := stampsOf(Default, ns.Name)

		By("rotating the key: a new current key, the first one retired, the operator restarted")
		op.kill()
		old := proofKeySecret(keys)
		replaceProofKey(keys, map[string][]byte{"key": newKey(), "retired-1": old.Data["key"]})
		op.start()
		for i := range 4 {
			complete(client.ObjectKey{Namespace: ns.Name, Name: mpi.JobSetName(name(i))})
		}
		Eventually(finished(ns.Name, 0, 4), 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			expectStampedAgain(g, first, stampsOf(g, ns.Name), 4, n)
		}, time.Minute, 200*time.Millisecond).Should(Succeed(), "the running jobs' children are stamped under the new key")

		By("planting a Secret with a made-up stamp in the place of one job's keys")
		op.kill()
		planted := plantKeys(ns.Name, name(n-1))
		op.start()
		Eventually(childConflict(ns.Name, name(n-1)), time.Minute, 200*time.Millisecond).Should(BeTrue())

		By("losing the key: its Secret deleted, the operator restarted and making a new one")
		op.kill()
		lost := proofKeySecret(keys)
		Expect(fw.Client.Delete(ctx, lost)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKeyFromObject(lost), &corev1.Secret{}))
		}, time.Minute, 100*time.Millisecond).Should(BeTrue())
		// The new key must be younger than the planted Secret, in the
		// whole seconds the API server counts creation times in.
		time.Sleep(time.Second)
		op.start()
		Expect(proofKeySecret(keys).UID).NotTo(Equal(lost.UID), "the operator made a new key")
		for i := 4; i < n-1; i++ {
			complete(client.ObjectKey{Namespace: ns.Name, Name: mpi.JobSetName(name(i))})
		}
		Eventually(finished(ns.Name, 4, n-1), 2*time.Minute, 200*time.Millisecond).Should(Succeed())

		By("the job that reported a conflict before the key was lost still reports it, its planted Secret untouched")
		Consistently(childConflict(ns.Name, name(n-1)), 5*time.Second, 500*time.Millisecond).Should(BeTrue())
		var still corev1.Secret
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(planted), &still)).To(Succeed())
		Expect(still.UID).To(Equal(planted.UID))
		Expect(still.Annotations[api.AnnotationProof]).To(Equal(planted.Annotations[api.AnnotationProof]))
	})
})

// stampsOf is the stamp of every JobSet, key Secret and NetworkPolicy in
// ns, by kind and name.
func stampsOf(g Gomega, ns string) map[string]string {
	out := map[string]string{}
	var jobSets jobsetv1alpha2.JobSetList
	g.Expect(fw.Client.List(ctx, &jobSets, client.InNamespace(ns))).To(Succeed())
	var secrets corev1.SecretList
	g.Expect(fw.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{api.LabelJobName})).To(Succeed())
	var policies networkingv1.NetworkPolicyList
	g.Expect(fw.Client.List(ctx, &policies, client.InNamespace(ns))).To(Succeed())
	for _, o := range append(append(items(jobSets.Items), items(secrets.Items)...), items(policies.Items)...) {
		if stamp, ok := o.GetAnnotations()[api.AnnotationProof]; ok {
			out[fmt.Sprintf("%T/%s", o, o.GetName())] = stamp
		}
	}
	return out
}

func newKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
}

func proofKeySecret(ns string) *corev1.Secret {
	GinkgoHelper()
	var s corev1.Secret
	Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: app.ProofKeySecret}, &s)).To(Succeed())
	return &s
}

// replaceProofKey puts a new proof-key Secret in place of the old one, as
// the documented rotation does (the Secret is immutable).
func replaceProofKey(ns string, data map[string][]byte) {
	GinkgoHelper()
	old := proofKeySecret(ns)
	Expect(fw.Client.Delete(ctx, old)).To(Succeed())
	Eventually(func() error {
		return fw.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app.ProofKeySecret}, Data: data})
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
}

// expectStampedAgain checks that every child still there carries another
// stamp than before, and that the children of jobs from to n are there.
func expectStampedAgain(g Gomega, before, now map[string]string, from, n int) {
	g.Expect(len(now)).To(BeNumerically(">=", 3*(n-from)))
	for child, stamp := range now {
		g.Expect(stamp).NotTo(Equal(before[child]), child)
	}
}

// plantKeys replaces a job's key Secret with one of other keys, controlled
// by the job and wearing a stamp no key made. The operator must not be
// running: it would make the job's keys again at once.
func plantKeys(ns, job string) *corev1.Secret {
	GinkgoHelper()
	var tj trainer.TrainJob
	Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &tj)).To(Succeed())
	real := &corev1.Secret{}
	Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mpi.SSHSecretName(job)}, real)).To(Succeed())
	Expect(fw.Client.Delete(ctx, real)).To(Succeed())
	planted := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: real.Name, Labels: real.Labels,
			Annotations:     map[string]string{api.AnnotationProof: "made-up", api.AnnotationJobSetRestarts: "0"},
			OwnerReferences: []metav1.OwnerReference{children.OwnerReference(&tj)},
		},
		Data: map[string][]byte{"ssh-privatekey": []byte("chosen")},
	}
	Eventually(func() error { return fw.Client.Create(ctx, planted) }, time.Minute, 100*time.Millisecond).Should(Succeed())
	return planted
}

func childConflict(ns, job string) func() bool {
	return func() bool {
		var tj trainer.TrainJob
		if err := fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &tj); err != nil {
			return false
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, trainjob.ConditionCreated)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == trainjob.ReasonChildConflict
	}
}

// finished checks that jobs from to to-1 in ns are Complete and their keys
// deleted.
func finished(ns string, from, to int) func(Gomega) {
	return func(g Gomega) {
		for i := from; i < to; i++ {
			job := fmt.Sprintf("job-%03d", i)
			var tj trainer.TrainJob
			g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &tj)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)).To(BeTrue(), job)
			err := fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mpi.SSHSecretName(job)}, &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s's keys are deleted", job)
		}
	}
}
