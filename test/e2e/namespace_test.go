package e2e

import (
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

var _ = Describe("A tenant's namespace deleted while its job runs", func() {
	BeforeEach(installRuntimes)

	It("goes entirely: the job, its JobSet, pods and SSH keys, none made again", func() {
		ns := newNamespace("ns-delete")
		succeed(mpiCmd("-n", ns, "run", "pi", "--image", "img", "--runtime", "torus-openmpi-long",
			"--workers", "4", "--", "mpirun", "-n", "4", "./train"))
		succeed(mpiCmd("-n", ns, "wait", "pi", "--for=condition=Running", "--timeout", "180s"))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: mpi.SSHSecretName("pi")}, &corev1.Secret{})).To(Succeed())

		// The namespace controller deletes the pods first and the rest
		// once they are gone: the pods must stop, the Job controller count
		// them, and the operator make nothing anew in a namespace that is
		// terminating.
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func() error {
			err := k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("namespace %s is still there, holding %s", ns, leftIn(ns))
		}, 2*timeout, interval).Should(Succeed())
	})
})

// leftIn names what a terminating namespace still holds: each pod with
// its phase and finalizers, and how many TrainJobs, JobSets and Secrets.
func leftIn(ns string) string {
	var parts []string
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			parts = append(parts, fmt.Sprintf("pod %s (%s, finalizers %v)", p.Name, p.Status.Phase, p.Finalizers))
		}
	}
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{{"TrainJobs", &trainer.TrainJobList{}}, {"JobSets", &jobsetv1alpha2.JobSetList{}}, {"Secrets", &corev1.SecretList{}}} {
		if err := k8sClient.List(ctx, l.list, client.InNamespace(ns)); err == nil {
			parts = append(parts, fmt.Sprintf("%d %s", apimeta.LenList(l.list), l.what))
		}
	}
	return strings.Join(parts, ", ")
}
