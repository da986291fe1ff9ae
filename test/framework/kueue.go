package framework

import (
	"context"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// NewQueue makes a ClusterQueue named after ns with the given quota in one
// flavor, and a LocalQueue "team" for it in ns, as a Kueue admin sets up a
// team; the ClusterQueue goes when the spec ends. It returns the
// LocalQueue's name.
func NewQueue(ctx context.Context, c client.Client, ns string, quota corev1.ResourceList) string {
	ginkgo.GinkgoHelper()
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}
	if err := c.Create(ctx, flavor); err != nil && !apierrors.IsAlreadyExists(err) {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	fq := kueue.FlavorQuotas{Name: "default-flavor"}
	var covered []corev1.ResourceName
	// A fixed order: CPU, memory, then the rest as given.
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := quota[name]; ok {
			covered = append(covered, name)
			fq.Resources = append(fq.Resources, kueue.ResourceQuota{Name: name, NominalQuota: q})
		}
	}
	for name, q := range quota {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			covered = append(covered, name)
			fq.Resources = append(fq.Resources, kueue.ResourceQuota{Name: name, NominalQuota: q})
		}
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups:    []kueue.ResourceGroup{{CoveredResources: covered, Flavors: []kueue.FlavorQuotas{fq}}},
		},
	}
	gomega.Expect(c.Create(ctx, cq)).To(gomega.Succeed())
	ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(c.Delete(ctx, cq))).To(gomega.Succeed()) })
	lq := &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq.Name)},
	}
	gomega.Expect(c.Create(ctx, lq)).To(gomega.Succeed())
	return lq.Name
}
