package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
)

const (
	timeout  = 90 * time.Second
	interval = 250 * time.Millisecond
	// runDuration is how long a simulated launcher runs (kwok stage).
	runDuration = "8s"
)

// installRuntimes installs the shipped sample runtimes, each in an e2e
// variant whose launcher runs for runDuration ("<name>-e2e"), and one whose
// launcher runs until told to fail ("<name>-long").
func installRuntimes() {
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "samples", "runtimes", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, f := range files {
		for suffix, duration := range map[string]string{"-e2e": runDuration, "-long": "1h"} {
			var rt trainer.ClusterTrainingRuntime
			framework.DecodeFile(f, &rt)
			rt.Name += suffix
			for i := range rt.Spec.Template.Spec.ReplicatedJobs {
				rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
				if rj.Name == mpi.LauncherJob {
					if rj.Template.Spec.Template.Annotations == nil {
						rj.Template.Spec.Template.Annotations = map[string]string{}
					}
					rj.Template.Spec.Template.Annotations["torus-mpi.io/kwok-run-duration"] = duration
				}
			}
			err := k8sClient.Create(ctx, &rt)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			Expect(err).NotTo(HaveOccurred(), "creating runtime %s", rt.Name)
		}
	}
}

func newNamespace(prefix string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed()) })
	defaultServiceAccount(ns.Name)
	return ns.Name
}

// defaultServiceAccount waits for the ServiceAccount the controller-manager
// makes in a new namespace. Pods name it unless told otherwise, and the API
// server refuses them while it is missing: the Job controller's FailedCreate
// event of such a refusal outlives it, and the operator would report it as
// the reason the job's pods wait.
func defaultServiceAccount(ns string) {
	GinkgoHelper()
	Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	}, timeout, interval).Should(Succeed(), "the controller-manager makes ServiceAccount default in namespace %s", ns)
}

// newQueue makes a ClusterQueue with the given GPU quota and a LocalQueue
// for it in ns, both named after ns.
func newQueue(ns string, gpus int) string {
	GinkgoHelper()
	return framework.NewQueue(ctx, k8sClient, ns, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		"nvidia.com/gpu": *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	})
}

func condition(tj *trainer.TrainJob, typ string) func(Gomega) *metav1.Condition {
	return framework.Condition(ctx, k8sClient, tj, typ)
}

// ranBeforeCompleting checks that a completed job had been Running, every
// rank up. Running is True only for the seconds a simulated launcher runs
// (a few), which a poll of the condition may miss on a loaded machine; the
// operator's Running event stays.
func ranBeforeCompleting(tj *trainer.TrainJob) {
	GinkgoHelper()
	Eventually(framework.EventReasons(ctx, k8sClient, tj), timeout, interval).Should(ContainElement(trainjob.ReasonRunning),
		"%s had all its ranks running before it completed", tj.Name)
}

func pods(tj *trainer.TrainJob) func(Gomega) []corev1.Pod {
	return func(g Gomega) []corev1.Pod {
		var list corev1.PodList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(tj.Namespace), client.MatchingLabels{api.LabelJobName: tj.Name})).To(Succeed())
		return list.Items
	}
}

// runningPod waits for a pod of a role and index to run, and returns it.
func runningPod(tj *trainer.TrainJob, role string, index int) *corev1.Pod {
	var found *corev1.Pod
	Eventually(func(g Gomega) {
		for _, p := range pods(tj)(g) {
			if p.Labels[api.LabelRole] == role && p.Labels["batch.kubernetes.io/job-completion-index"] == fmt.Sprint(index) && p.Status.Phase == corev1.PodRunning {
				found = &p
				return
			}
		}
		g.Expect(found).NotTo(BeNil(), "no running %s %d", role, index)
	}, timeout, interval).Should(Succeed())
	return found
}

// inject makes kwok terminate a running pod as the kubelet would report an
// OOM kill ("oom") or a non-zero exit ("error").
func inject(p *corev1.Pod, failure string) {
	annotate(p, "torus-mpi.io/kwok-fail", failure)
}

// finish makes kwok complete a running launcher now, as mpirun returning 0
// would: kwok plays its stage again, with a run duration of zero, when the
// pod changes.
func finish(p *corev1.Pod) {
	annotate(p, framework.KwokRunDuration, "0s")
}

// annotate sets one annotation of a pod, with a merge patch.
func annotate(p *corev1.Pod, key, value string) {
	GinkgoHelper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

func typeName(o any) string { return fmt.Sprintf("%T", o) }
