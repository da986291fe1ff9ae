package cluster

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// realNodeRestarts trains the reference training on the real nodes once
// straight through, and once losing a worker mid-run: the job restarts its
// whole world and resumes from its last checkpoint, to the same model.
func realNodeRestarts(dirp *string) {
	Context("a training that loses a worker on the real nodes", Ordered, func() {
		var dir, straight string
		// train is the reference training, trained to out.
		train := func(out string, more ...string) []string {
			return append([]string{"--", "mpirun", "-n", "4", "python3", "/opt/torus/train.py", "--epochs", "12", "--output", out}, more...)
		}
		sha := regexp.MustCompile(`model saved to \S+ \(sha256 ([0-9a-f]{64})\)`)

		BeforeAll(func() {
			dir = *dirp
			// The local cluster's volumes are one directory of the machine's
			// that every real node mounts: ReadWriteMany, as a shared file
			// system's.
			apply(dir, &corev1.PersistentVolumeClaim{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: "restarts", Namespace: "default"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					StorageClassName: ptr.To("local"),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
				},
			})
			DeferCleanup(func() { kubectl(dir, "delete", "pvc", "restarts", "--wait=false") })

			By("training straight through, without checkpoints")
			out, code := kubectlMPI(dir, append([]string{"run", "straight", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
				"--volume", "pvc:restarts:/out", "--wait", "--timeout", "6m"}, train("/out/straight.npz")...)...)
			if code != 0 {
				Fail(fmt.Sprintf("the straight training did not complete (exit %d):\n%s\n%s", code, out, jobReport(dir, "straight", nil)))
			}
			logs, _ := kubectlMPI(dir, "logs", "straight", "--launcher")
			m := sha.FindStringSubmatch(logs)
			Expect(m).NotTo(BeNil(), logs)
			straight = m[1]
			kubectlMPI(dir, "delete", "straight")
		})

		It("restarts the whole world without spending its budget when a worker's pod is deleted, and resumes to the same model", func() {
			DeferCleanup(func() { kubectlMPI(dir, "delete", "resumed") })
			// No budget at all: only a restart that does not count lets the
			// job complete.
			out, code := kubectlMPI(dir, append([]string{"run", "resumed", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
				"--checkpoint-volume", "restarts", "--max-restarts", "0"}, train("/checkpoint/resumed.npz", "--pace", "2")...)...)
			Expect(code).To(Equal(0), out)
			logs := kubectlMPIInBackground(dir, "logs", "resumed", "-f")

			By("a worker's pod deleted once the run has saved a checkpoint")
			Eventually(func() string {
				out, _ := kubectlMPI(dir, "logs", "resumed", "--launcher")
				return out
			}, 4*time.Minute, time.Second).Should(MatchRegexp(`checkpoint saved after epoch [3-9]`), "no checkpoint:\n%s", jobReport(dir, "resumed", nil))
			worker, _ := kubectl(dir, "get", "pods", "-o", "name", "-l",
				"jobset.sigs.k8s.io/jobset-name=resumed,jobset.sigs.k8s.io/replicatedjob-name=node,jobset.sigs.k8s.io/restart-attempt=0,batch.kubernetes.io/job-completion-index=1")
			Expect(strings.TrimSpace(worker)).NotTo(BeEmpty())
			out, code = kubectl(dir, "delete", strings.TrimSpace(worker), "--wait=false")
			Expect(code).To(Equal(0), out)

			By("the job restarted, not failed, and completes")
			out, code = kubectlMPI(dir, "wait", "resumed", "--timeout", "6m")
			if code != 0 {
				Fail(fmt.Sprintf("the job did not complete after its worker was deleted (exit %d):\n%s\n%s", code, out, jobReport(dir, "resumed", logs)))
			}
			restarts, _ := kubectl(dir, "get", "jobset", "resumed", "-o", "jsonpath={.status.restarts}")
			Expect(restarts).To(Equal("1"))
			counted, _ := kubectl(dir, "get", "jobset", "resumed", "-o", "jsonpath={.status.restartsCountTowardsMax}")
			Expect(counted).To(Or(BeEmpty(), Equal("0")), "the worker's loss was counted as the program's failure")

			By("describe says the job restarted once, uncounted, and why")
			describe, _ := kubectlMPI(dir, "describe", "resumed")
			Expect(describe).To(ContainSubstring("Restarts: 1, 0 counted against the budget of 0"))
			// The deleted worker's word, or the launcher's that lost it,
			// whichever the operator saw first.
			Expect(describe).To(MatchRegexp(`run 0 stopped \S+ \(not counted\): (worker-1 \(ranks 2-3\) Stopped: its pod was stopped while it ran the job's ranks|launcher WorldLost: )`))

			By("the second run resumed from the checkpoint, to the model trained straight through")
			run, _ := kubectlMPI(dir, "logs", "resumed", "--launcher")
			resumed := regexp.MustCompile(`run 1: training from the checkpoint after epoch (\d+)`).FindStringSubmatch(run)
			Expect(resumed).NotTo(BeNil(), run)
			from, _ := strconv.Atoi(resumed[1])
			Expect(from).To(BeNumerically(">=", 3), run)
			var trained []int
			for _, e := range regexp.MustCompile(`(?m)^\[launcher\] epoch (\d+)/12 `).FindAllStringSubmatch(run, -1) {
				n, _ := strconv.Atoi(e[1])
				trained = append(trained, n)
			}
			Expect(trained).NotTo(BeEmpty(), run)
			Expect(trained[0]).To(Equal(from+1), "the second run did not go on from the checkpoint's epoch:\n%s", run)
			m := sha.FindStringSubmatch(run)
			Expect(m).NotTo(BeNil(), run)
			Expect(m[1]).To(Equal(straight), "the resumed training ended with another model than the straight one")
		})
	})
}
