package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/internal/transcript"
)

// quickstart is the document whose console sessions the local cluster
// runs: every command, and what it prints.
const quickstart = "docs/users/quickstart.md"

// realNodeTraining runs the quick start on the real nodes: the reference
// training across both nodes, its model saved to a claim that outlives the
// job and that another pod reads back. Each command must print what the
// document shows; the training's own results are then checked in full.
func realNodeTraining(dirp *string) {
	Context("the quick start's reference training on the real nodes", Ordered, func() {
		var dir string
		// printed is what each command of the document printed.
		printed := map[string]string{}

		BeforeAll(func() { dir = *dirp })

		It("runs every command of the quick start on the local cluster, each printing what the document shows", func() {
			f, err := os.Open(filepath.Join(root, quickstart))
			Expect(err).NotTo(HaveOccurred())
			defer f.Close()
			steps, err := transcript.Parse(f)
			Expect(err).NotTo(HaveOccurred())
			Expect(steps).NotTo(BeEmpty(), "%s shows no console session", quickstart)
			// The training job's logs, from its creation on, for the report
			// of a failure: its workers' pods go when it ends.
			var logs *background
			for _, step := range steps {
				cmd := exec.Command("sh", "-c", step.Command)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"),
					"PATH="+filepath.Join(root, "bin")+":"+testbin+":"+os.Getenv("PATH"))
				out, err := cmd.CombinedOutput()
				GinkgoWriter.Printf("$ %s\n%s", step.Command, out)
				printed[step.Command] = string(out)
				if logs == nil && strings.HasPrefix(step.Command, "kubectl mpi run digits") {
					logs = kubectlMPIInBackground(dir, "logs", "digits", "-f")
				}
				if err != nil {
					Fail(fmt.Sprintf("%s:%d: %s failed (%v):\n%s\n%s", quickstart, step.Line, step.Command, err, out, jobReport(dir, "digits", logs)))
				}
				if !transcript.Match(step.Output, string(out)) {
					Fail(fmt.Sprintf("%s:%d: %s printed\n%s\nwhere the document shows\n%s", quickstart, step.Line, step.Command, out, strings.Join(step.Output, "\n")))
				}
			}
		})

		It("trains with 4 ranks across both nodes, each epoch reported, and saves the model byte for byte where another pod read it", func() {
			var out string
			for command, o := range printed {
				if strings.HasPrefix(command, "kubectl mpi logs digits --launcher") {
					out = o
				}
			}
			Expect(out).NotTo(BeEmpty(), "the quick start read no training output")
			Expect(scheduledNodes(dir, "default", "digits-node-0-")).To(ConsistOf("real-node-0", "real-node-1"), "the workers did not span both nodes")
			Expect(regexp.MustCompile(`(?m)^\[launcher\] epoch \d+/30 loss [0-9.]+ train accuracy [0-9.]+ test accuracy [0-9.]+$`).FindAllString(out, -1)).To(HaveLen(30))
			final := regexp.MustCompile(`test accuracy (0\.\d+) with 4 ranks`).FindStringSubmatch(out)
			Expect(final).NotTo(BeNil(), out)
			Expect(final[1] >= "0.9").To(BeTrue(), "the model reached only %s test accuracy", final[1])
			// Ranks of one pod share memory without process_vm_readv,
			// which the pods' seccomp profile refuses.
			Expect(out).NotTo(ContainSubstring("Read -1, expected"))

			// The model is on the volume the claim bound, as rank 0 wrote it.
			saved := regexp.MustCompile(`model saved to /models/digits\.npz \(sha256 ([0-9a-f]{64})\)`).FindStringSubmatch(out)
			Expect(saved).NotTo(BeNil(), out)
			pv, _ := kubectl(dir, "get", "pvc", "models", "-o", "jsonpath={.spec.volumeName}")
			path, _ := kubectl(dir, "get", "pv", strings.TrimSpace(pv), "-o", "jsonpath={.spec.hostPath.path}")
			model, err := os.ReadFile(filepath.Join(strings.TrimSpace(path), "digits.npz"))
			Expect(err).NotTo(HaveOccurred())
			sum := sha256.Sum256(model)
			Expect(hex.EncodeToString(sum[:])).To(Equal(saved[1]))

			// The pod that loaded it found the accuracy the training reported.
			Expect(printed["kubectl logs evaluate-digits"]).To(ContainSubstring("test accuracy " + final[1] + " on 445 held-out digits"))
		})
	})
}
