package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/test/framework"
)

const (
	// logsNamespace is where kwok serves every container 2,000 numbered
	// lines (test/localcluster/kwok/logs.yaml).
	logsNamespace = "torus-logs-bench"
	logLines      = 2000
	bigWorkers    = 64
	// benchWorkers: the benchmark reads a job of 256 ranks.
	benchWorkers = 256
)

var numbered = regexp.MustCompile(`^line (\d{5}) of 02000: step=(\d+) `)

// checkEveryLine asserts that output holds, for each prefix, every
// numbered line exactly once and in order; it returns the prefixes seen.
func checkEveryLine(out string, wantLines int) []string {
	GinkgoHelper()
	next := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		i := strings.Index(line, "] ")
		Expect(i).To(BeNumerically(">", 0), "line without a host prefix: %q", line)
		prefix, body := line[:i+1], line[i+2:]
		m := numbered.FindStringSubmatch(body)
		Expect(m).NotTo(BeNil(), "%s: unexpected line %q", prefix, body)
		next[prefix]++
		Expect(m[1]).To(Equal(fmt.Sprintf("%05d", next[prefix]+(logLines-wantLines))), "%s: line out of order or missing", prefix)
	}
	var prefixes []string
	for p, n := range next {
		Expect(n).To(Equal(wantLines), "%s: %d lines, want %d", p, n, wantLines)
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	return prefixes
}

func logsNamespaceReady() {
	GinkgoHelper()
	// A namespace of an earlier run may still be terminating.
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: logsNamespace}, &corev1.Namespace{}))
	}, 2*timeout, interval).Should(BeTrue(), "namespace %s of an earlier run is still there", logsNamespace)
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: logsNamespace}})).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: logsNamespace}}))).To(Succeed())
	})
	defaultServiceAccount(logsNamespace)
}

var _ = Describe("kubectl mpi logs", Ordered, func() {
	BeforeAll(func() {
		logsNamespaceReady()
		succeed(mpiCmd("-n", logsNamespace, "run", "big", "--image", "img", "--runtime", "torus-openmpi-long",
			"--workers", fmt.Sprint(bigWorkers), "--", "mpirun", "-n", fmt.Sprint(bigWorkers), "./train"))
		DeferCleanup(deleteAndWait, logsNamespace, "big")
		succeed(mpiCmd("-n", logsNamespace, "wait", "big", "--for=condition=Running", "--timeout", "180s"))
	})

	It("keeps every line of every pod of a 64-rank job, in order within each pod", func() {
		r := succeed(mpiCmd("-n", logsNamespace, "logs", "big"))
		prefixes := checkEveryLine(r.Stdout, logLines)
		Expect(prefixes).To(HaveLen(bigWorkers + 1))
		Expect(prefixes).To(ContainElements("[launcher]", "[worker-0]", "[worker-63]"))
		Expect(r.Stderr).To(BeEmpty())
	})

	It("picks pods by rank, worker or launcher, and passes --tail and --timestamps on", func() {
		r := succeed(mpiCmd("-n", logsNamespace, "logs", "big", "--rank", "37"))
		Expect(checkEveryLine(r.Stdout, logLines)).To(Equal([]string{"[worker-37]"}))
		r = succeed(mpiCmd("-n", logsNamespace, "logs", "big", "--worker", "5", "--tail", "10"))
		Expect(checkEveryLine(r.Stdout, 10)).To(Equal([]string{"[worker-5]"}))
		r = succeed(mpiCmd("-n", logsNamespace, "logs", "big", "--launcher", "--tail", "1", "--timestamps"))
		Expect(r.Stdout).To(Equal("[launcher] 2026-01-01T00:00:02.000000000Z line 02000 of 02000: step=2000 loss=0.000500\n"))
		r = mpiCmd("-n", logsNamespace, "logs", "big", "--rank", "64")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(Equal("error: --rank: MPI job big: rank 64 is out of range: the job has ranks 0 to 63\n"))
	})

	It("benchmarks against kubectl logs -l <job selector> --prefix on a 256-rank job", Label("bench"), func() {
		const job = "ranks256"
		succeed(mpiCmd("-n", logsNamespace, "run", job, "--image", "img", "--runtime", "torus-openmpi-long",
			"--workers", fmt.Sprint(benchWorkers), "--", "mpirun", "-n", fmt.Sprint(benchWorkers), "./train"))
		DeferCleanup(deleteAndWait, logsNamespace, job)
		succeed(mpiCmd("-n", logsNamespace, "wait", job, "--for=condition=Running", "--timeout", "300s"))
		pods := benchWorkers + 1
		kubectl := framework.RepoRoot() + "/.testbin/bin/kubectl"
		tools := []struct {
			name string
			argv []string
		}{
			{"kubectl mpi logs", []string{pluginBinary(), "--kubeconfig", clusterKubeconfig(), "-n", logsNamespace, "logs", job}},
			{"kubectl logs -l --prefix", []string{kubectl, "--kubeconfig", clusterKubeconfig(), "-n", logsNamespace, "logs", "-l", api.LabelJobName + "=" + job,
				"--prefix", fmt.Sprintf("--max-log-requests=%d", pods), "-c", mpi.TrainerContainer,
				// With a selector kubectl shows the last 10 lines unless told.
				"--tail=-1"}},
		}
		const rounds = 5
		type stats struct{ first, total []time.Duration }
		got := map[string]*stats{}
		var lines, bytes int
		for round := range rounds {
			for _, tool := range tools {
				first, total, n, b := timeRun(tool.argv)
				if got[tool.name] == nil {
					got[tool.name] = &stats{}
				}
				got[tool.name].first = append(got[tool.name].first, first)
				got[tool.name].total = append(got[tool.name].total, total)
				Expect(n).To(Equal(pods*logLines), "%s, round %d: every line of every pod", tool.name, round)
				lines, bytes = n, b
			}
		}
		var report strings.Builder
		fmt.Fprintf(&report, "%d pods x %d lines = %d lines (%.1f MB of kubectl mpi output), median of %d runs, 2-core machine\n",
			pods, logLines, lines, float64(bytes)/1e6, rounds)
		fmt.Fprintf(&report, "| tool | time to first line | total | lines/s |\n| --- | --- | --- | --- |\n")
		for _, tool := range tools {
			s := got[tool.name]
			total := median(s.total)
			fmt.Fprintf(&report, "| %s | %s | %s | %.0f |\n", tool.name, median(s.first).Round(time.Millisecond), total.Round(time.Millisecond), float64(lines)/total.Seconds())
		}
		AddReportEntry("kubectl mpi logs benchmark", report.String())
		GinkgoWriter.Println(report.String())
	})

	It("follows pods that start later until the job ends", func() {
		ns := newNamespace("plugin-logs")
		queue := newQueue(ns, 8)
		r := mpiCmd("-n", ns, "logs", "pi", "-f")
		Expect(r.Code).To(Equal(1), "following a job that does not exist fails at once")

		By("a job held in its queue has no pod yet when following starts")
		lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: queue}}
		hold := func(p kueue.StopPolicy) {
			patch := []byte(fmt.Sprintf(`{"spec":{"stopPolicy":%q}}`, p))
			Expect(k8sClient.Patch(ctx, lq, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		hold(kueue.Hold)
		// Kueue takes a held queue out of its queueing as it sees the
		// change, and only then reports it stopped: a job queued before
		// that could be admitted at once.
		Eventually(func(g Gomega) {
			var got kueue.LocalQueue
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(lq), &got)).To(Succeed())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, kueue.LocalQueueActive)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "Stopped")), "Kueue holds LocalQueue %s", queue)
		}, timeout, interval).Should(Succeed())
		succeed(mpiCmd("-n", ns, "run", "pi", "--image", "img", "--runtime", "torus-openmpi-e2e", "--workers", "3",
			"--queue", queue, "--", "mpirun", "./pi"))
		following := mpiAsync("-n", ns, "logs", "pi", "-f")
		Consistently(pods(trainJobRef(ns, "pi")), 2*time.Second, interval).Should(BeEmpty())

		By("released, its pods start, are followed, and following ends with the job")
		hold(kueue.None)
		r = following()
		Expect(r.Code).To(Equal(0), r.Stderr)
		for _, host := range []string{"launcher", "worker-0", "worker-1", "worker-2"} {
			Expect(r.Stdout).To(ContainSubstring("[%s] pi is approximately 3.14", host))
		}
		// Measured from the job's end, not from the command's start: how
		// long the job took to be admitted, start and run is the cluster's
		// speed, not the follower's.
		complete := condition(trainJobRef(ns, "pi"), trainer.TrainJobComplete)(Default)
		Expect(complete.Status).To(Equal(metav1.ConditionTrue), "following ends when the job has ended, not before")
		Expect(time.Since(complete.LastTransitionTime.Time)).To(BeNumerically("<", timeout), "following ends with the job, not long after")
	})
})

// timeRun runs a command and measures the time to its first line of
// output, the time to its end, and counts its lines and bytes.
func timeRun(argv []string) (first, total time.Duration, lines, bytes int) {
	GinkgoHelper()
	cmd := exec.Command(argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	Expect(cmd.Start()).To(Succeed())
	r := bufio.NewReaderSize(stdout, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			if lines == 0 {
				first = time.Since(start)
			}
			lines++
			bytes += len(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			Expect(err).NotTo(HaveOccurred())
		}
	}
	Expect(cmd.Wait()).To(Succeed(), "%v: %s", argv, stderr.String())
	return first, time.Since(start), lines, bytes
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
