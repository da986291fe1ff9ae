package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/torus-mpi/torus/test/framework"
)

// realNodeDashboard drives the dashboard in headless Chromium against the
// real node: what a data scientist does in it, end to end.
func realNodeDashboard(dirp *string) {
	Context("the dashboard in a real browser", Ordered, func() {
		var dir, url string
		var b *framework.Browser
		artifacts := filepath.Join(framework.RepoRoot(), ".artifacts", "dashboard")

		BeforeAll(func() {
			dir = *dirp
			applyRealQueue(dir)
			url = framework.StartDashboard(filepath.Join(root, "bin", "kubectl-mpi"), filepath.Join(dir, "kubeconfig"))
			b = framework.NewBrowser(artifacts)
			// The printed URL trades its token for this run's cookie.
			b.Open(url)
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("Jobs"))
			DeferCleanup(func() {
				for _, j := range []string{"web-pi", "web-fail", "web-fail-2", "web-live", "web-keys", "web-train"} {
					kubectlMPI(dir, "delete", j)
				}
			})
		})

		It("creates a job through the form: run's rules and the webhook's words beside the fields, then its hosts turn green on the real node and its ranks' logs stream", func() {
			b.Open(framework.DashboardBase(url) + "/#/create")
			b.Fill("#f-name", "Web_Pi")
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring(`job name "Web_Pi" is not an RFC 1035 label`))
			b.Fill("#f-name", "web-pi")
			b.Fill("#f-workers", "0")
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("--workers=0: a job needs at least 1 worker"))
			b.Fill("#f-workers", "2")
			b.Fill("#f-slots-per-worker", "2")
			b.Fill("#f-runtime", "torus-openmpi-local")
			b.Fill("#f-queue", "real")
			b.Fill("#f-image", "not an image")
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("not an image reference"),
				"the webhook's own words, from the API server's dry run, beside the image field")
			b.Fill("#f-image", "")
			// The launcher waits a little, so its workers are seen Ready.
			b.Fill("#f-command", "sh -c 'sleep 15 && exec "+strings.Join(piCommand["torus-openmpi-local"], " ")+"'")
			Eventually(func() string { return b.Text() }, 30*time.Second, 200*time.Millisecond).ShouldNot(Or(
				ContainSubstring("--workers=0"), ContainSubstring("not an image reference"), ContainSubstring("RFC 1035")))
			By("what the job asks against what the queue has free now, before it is submitted")
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(And(ContainSubstring("Will it fit?"), ContainSubstring(`the job asks for nothing ClusterQueue "real" counts`)))
			framework.ExpectAccessible(b, "create")
			b.Screenshot("create")
			b.Click("button[type=submit]")
			Eventually(func() (string, error) { return framework.Eval[string](b, "location.hash") }, 30*time.Second, 200*time.Millisecond).
				Should(Equal("#/jobs/default/web-pi"))

			By("its workers green on the real node while the launcher waits")
			Eventually(func() int { return b.Count(".torus-host--Ready") }, 3*time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 2),
				func() string { return "the page:\n" + b.Text() + "\n" + jobReport(dir, "web-pi", nil) })
			Expect(b.Text()).To(ContainSubstring("real-node-0"))
			By("each running host's CPU and memory, as top reads them from the kubelet")
			Eventually(b.Text, time.Minute, 200*time.Millisecond).Should(And(ContainSubstring("CPU and memory from kubelet resource metrics"),
				MatchRegexp(`CPU \d+m, memory \d+Mi`)))
			framework.ExpectAccessible(b, "job")
			b.Screenshot("job")

			By("every rank's logs, streamed")
			b.ClickText("Logs")
			Eventually(b.Text, 3*time.Minute, 200*time.Millisecond).Should(MatchRegexp(piResult))
			Eventually(b.Text, 3*time.Minute, time.Second).Should(ContainSubstring("Complete"))
			framework.ExpectAccessible(b, "logs")
			b.Screenshot("logs")
		})

		It("shows a failing job's rank in red with its cause and its last words; clone and modify fixes it", func() {
			out, code := kubectlMPI(dir, "run", "web-fail", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
				"--queue", "real", "--", "sh", "-c", "echo the model diverged >&2; exit 3")
			Expect(code).To(Equal(0), out)
			b.Open(framework.DashboardBase(url) + "/#/jobs/default/web-fail")
			Eventually(b.Text, 3*time.Minute, time.Second).Should(And(ContainSubstring("Why it failed"), ContainSubstring("exited with code 3"),
				ContainSubstring("the model diverged")), func() string { return "the page:\n" + b.Text() })
			Expect(b.Count(".torus-host--Failed")).To(BeNumerically(">=", 1), "no host shown failed")
			framework.ExpectAccessible(b, "failed job")
			b.Screenshot("failed")

			b.ClickText("Clone and modify")
			Eventually(func() string { return b.Value("#f-command") }, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("exit 3"))
			Expect(b.Value("#f-name")).To(Equal("web-fail-2"))
			Expect(b.Value("#f-workers")).To(Equal("2"))
			Expect(b.Value("#f-queue")).To(Equal("real"))
			b.Fill("#f-command", strings.Join(piCommand["torus-openmpi-local"], " "))
			Eventually(func() (bool, error) {
				return framework.Eval[bool](b, "!document.querySelector('button[type=submit]').disabled")
			}, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), func() string { return "the page:\n" + b.Text() })
			b.Click("button[type=submit]")
			Eventually(b.Text, 3*time.Minute, time.Second).Should(ContainSubstring("Complete"),
				func() string { return "the page:\n" + b.Text() + "\n" + jobReport(dir, "web-fail-2", nil) })
		})

		It("lists the jobs as they change, without a reload, with a guide to job types", func() {
			b.Open(framework.DashboardBase(url) + "/#/jobs")
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(And(ContainSubstring("web-pi"), ContainSubstring("web-fail-2")))
			framework.ExpectAccessible(b, "jobs")
			b.Screenshot("jobs")
			out, code := kubectlMPI(dir, "run", "web-live", "--runtime", "torus-openmpi-local", "--workers", "1", "--queue", "real", "--", "true")
			Expect(code).To(Equal(0), out)
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("web-live"), "a job created meanwhile did not appear")

			b.Open(framework.DashboardBase(url) + "/#/guide")
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(And(ContainSubstring("torus-openmpi-local"), ContainSubstring("PyTorch")))
			framework.ExpectAccessible(b, "guide")
		})

		It("shows a training's progress as its program reports it: a bar with the time left, the metrics and a chart of each over the run on its page, a bar in the list", func() {
			out, code := kubectlMPI(dir, "run", "web-train", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "1",
				"--", "mpirun", "-n", "2", "python3", "/opt/torus/train.py", "--epochs", "30", "--pace", "6")
			Expect(code).To(Equal(0), out)
			// Three minutes of training: the page is read while it runs,
			// however long a busy machine takes to show it.
			b.Open(framework.DashboardBase(url) + "/#/jobs/default/web-train")
			Eventually(b.Text, 3*time.Minute, time.Second).Should(And(ContainSubstring("Training progress"), MatchRegexp(`about \S+ left; reported \S+ ago`),
				ContainSubstring("loss"), ContainSubstring("test_accuracy")), func() string { return "the page:\n" + b.Text() + "\n" + jobReport(dir, "web-train", nil) })
			Expect(framework.Eval[float64](b, `Number(document.querySelector('.torus-progress [role=progressbar]').getAttribute('aria-valuenow'))`)).
				To(And(BeNumerically(">", 0), BeNumerically("<", 100)))
			// The loss over the run: a chart of the points the status server
			// kept (one per write at most, every 10 s), a dot each, as its
			// caption counts them.
			lossChart := `figure.torus-chart[aria-label="loss over the run"]`
			points := func() (int, error) {
				caption, err := framework.Eval[string](b, `document.querySelector('`+lossChart+` figcaption')?.textContent ?? ''`)
				m := regexp.MustCompile(`^loss: \S+ \((\d+) points over \S+: from \S+ to \S+\)$`).FindStringSubmatch(caption)
				if err != nil || m == nil {
					return 0, err
				}
				return strconv.Atoi(m[1])
			}
			Eventually(points, 2*time.Minute, time.Second).Should(BeNumerically(">=", 4), func() string { return "the page:\n" + b.Text() })
			n, err := points()
			Expect(err).NotTo(HaveOccurred())
			Expect(framework.Eval[int](b, `document.querySelectorAll('`+lossChart+` svg path[role=presentation]').length`)).To(BeNumerically(">=", n),
				"a dot for each of the %d points", n)
			Expect(framework.Eval[bool](b, `!!document.querySelector('figure.torus-chart[aria-label="test_accuracy over the run"] svg')`)).To(BeTrue())
			framework.ExpectAccessible(b, "progress")
			_, err = framework.Eval[bool](b, `document.querySelector('.torus-progress').scrollIntoView(), true`)
			Expect(err).NotTo(HaveOccurred())
			b.Screenshot("progress")

			b.Open(framework.DashboardBase(url) + "/#/jobs")
			Eventually(func() (bool, error) {
				return framework.Eval[bool](b, `!!document.querySelector('[role=progressbar][aria-label="Progress of web-train"]')`)
			}, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), func() string { return "the page:\n" + b.Text() })
			// Beside the bar: the time left and the latest metrics.
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(MatchRegexp(`(about \S+ left; )?loss=[0-9.]+, train_accuracy=[0-9.]+, 1 more`))
			framework.ExpectAccessible(b, "jobs with progress")
		})

		It("works from the keyboard alone: a job created, its logs read, the job deleted", func() {
			keyboardSpec(dir, b, url)
		})

		It("tells a user without rights why they see nothing", func() {
			out, code := kubectl(dir, "create", "serviceaccount", "dashboard-nobody")
			Expect(code).To(Equal(0), out)
			DeferCleanup(func() { kubectl(dir, "delete", "serviceaccount", "dashboard-nobody") })
			token, code := kubectl(dir, "create", "token", "dashboard-nobody")
			Expect(code).To(Equal(0), token)
			cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
			Expect(err).NotTo(HaveOccurred())
			for _, ai := range cfg.AuthInfos {
				ai.ClientCertificate, ai.ClientKey, ai.ClientCertificateData, ai.ClientKeyData = "", "", nil, nil
				ai.Token, ai.TokenFile = strings.TrimSpace(token), ""
			}
			nobody := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
			Expect(clientcmd.WriteToFile(*cfg, nobody)).To(Succeed())
			Expect(os.Chmod(nobody, 0o600)).To(Succeed())
			other := framework.StartDashboard(filepath.Join(root, "bin", "kubectl-mpi"), nobody)
			b.Open(other)
			Eventually(b.Text, 30*time.Second, 200*time.Millisecond).Should(And(ContainSubstring("Cannot list jobs"), ContainSubstring("forbidden"),
				ContainSubstring("system:serviceaccount:default:dashboard-nobody")))
			b.Screenshot("forbidden")
		})
	})
}

// keyboardSpec is the dashboard used with the keyboard alone: a job
// created, its logs read, the job deleted, each by Tab, typing and Enter.
func keyboardSpec(dir string, b *framework.Browser, url string) {
	GinkgoHelper()
	b.Open(framework.DashboardBase(url) + "/#/jobs")
	b.TabTo(`a[href="#/create"]`)
	b.Type("\r")
	Eventually(func() (string, error) { return framework.Eval[string](b, "location.hash") }, 30*time.Second, 200*time.Millisecond).Should(Equal("#/create"))
	for _, f := range []struct{ id, value string }{
		{"#f-name", "web-keys"},
		{"#f-command", strings.Join(piCommand["torus-openmpi-local"], " ")},
		{"#f-workers", "2"},
		{"#f-slots-per-worker", "2"},
		{"#f-queue", "real"},
	} {
		b.TabTo(f.id)
		b.SelectAll()
		b.Type(f.value)
	}
	b.TabTo("#f-runtime")
	// A select takes the first option whose label starts with what is typed.
	b.Type("torus-openmpi-local")
	Eventually(func() string { return b.Value("#f-runtime") }, 10*time.Second, 200*time.Millisecond).Should(Equal("torus-openmpi-local"))
	b.TabTo(`button[type=submit]:not([disabled])`)
	b.Type("\r")
	Eventually(func() (string, error) { return framework.Eval[string](b, "location.hash") }, 30*time.Second, 200*time.Millisecond).
		Should(Equal("#/jobs/default/web-keys"), func() string { return "the page:\n" + b.Text() })
	b.TabTo(`[role=tab][id^="pf-tab-logs"]`)
	b.Type("\r")
	Eventually(b.Text, 3*time.Minute, time.Second).Should(MatchRegexp(piResult), func() string { return jobReport(dir, "web-keys", nil) })
	b.TabTo(`button.pf-m-danger`)
	b.Type("\r")
	Eventually(b.Text, 10*time.Second, 200*time.Millisecond).Should(ContainSubstring("Delete job web-keys?"))
	b.TabTo(`[role=dialog] button.pf-m-danger`)
	b.Type("\r")
	Eventually(func() (string, error) { return framework.Eval[string](b, "location.hash") }, 30*time.Second, 200*time.Millisecond).Should(Equal("#/jobs"))
	Eventually(func() int {
		_, code := kubectlMPI(dir, "describe", "web-keys")
		return code
	}, time.Minute, time.Second).ShouldNot(Equal(0), "the job was not deleted")
}
