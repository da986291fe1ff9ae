package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/test/framework"
)

// What one open dashboard page of a big job costs the API server, on the
// local cluster's kwok nodes: `make bench-dashboard-job` (its size is
// TORUS_BENCH_DASHBOARD_WORKERS, 4,096 by default; the report goes to
// TORUS_BENCH_OUT when set).
var _ = Describe("kubectl mpi dashboard, one open page of a big job", Label("bench"), func() {
	It("bench: counts the requests and bytes the page costs the API server while the job starts, while every pod changes and while its logs are followed", func() {
		workers := 4096
		if v := os.Getenv("TORUS_BENCH_DASHBOARD_WORKERS"); v != "" {
			var err error
			workers, err = strconv.Atoi(v)
			Expect(err).NotTo(HaveOccurred(), "TORUS_BENCH_DASHBOARD_WORKERS")
		}
		hosts := workers + 1
		ns := newNamespace("dashbench")
		proxy := framework.NewRecordingProxy(restConfig)
		url := framework.StartDashboard(pluginBinary(), proxy.Kubeconfig(GinkgoT().TempDir()), "-n", ns)
		b := framework.NewBrowser(filepath.Join(framework.RepoRoot(), ".artifacts", "dashboard"))
		b.Open(url)

		type phase struct {
			name                                     string
			seconds                                  float64
			requests, podLists, jobReads, logStreams int
			bytes                                    int64
			byKind                                   map[string]int
		}
		var phases []phase
		mark := 0
		// A watch's answer grows after the phase that opened it: bytes are
		// counted over every request, as a difference.
		var bytesBefore int64
		startedAt := time.Now()
		record := func(name string) {
			all := proxy.Matching(func(framework.Request) bool { return true })
			p := phase{name: name, seconds: time.Since(startedAt).Seconds(), byKind: map[string]int{}}
			streams := map[string]bool{}
			var total int64
			for _, r := range all {
				total += r.Bytes
			}
			p.bytes, bytesBefore = total-bytesBefore, total
			for _, r := range all[mark:] {
				p.requests++
				p.byKind[requestKind(r)]++
				switch {
				case r.Method == "GET" && !r.Watch() && r.Path == "/api/v1/namespaces/"+ns+"/pods":
					p.podLists++
				case r.Method == "GET" && strings.HasSuffix(r.Path, "/namespaces/"+ns+"/trainjobs/big"):
					p.jobReads++
				case strings.HasSuffix(r.Path, "/log"):
					streams[r.Path] = true
				}
			}
			p.logStreams = len(streams)
			phases = append(phases, p)
			mark, startedAt = len(all), time.Now()
		}
		jobReads := func() int {
			return proxy.Count(func(r framework.Request) bool {
				return r.Method == "GET" && strings.HasSuffix(r.Path, "/namespaces/"+ns+"/trainjobs/big")
			})
		}
		pods := func() []corev1.Pod {
			var list corev1.PodList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{api.LabelJobName: "big"})).To(Succeed())
			return list.Items
		}
		// settled waits until the page read the job after one last change,
		// made after every change before it was sent.
		settled := func() {
			before := jobReads()
			p := pods()[0]
			annotate(&p, "bench.torus-mpi.io/last", time.Now().Format(time.RFC3339Nano))
			Eventually(jobReads, 2*time.Minute, 100*time.Millisecond).Should(BeNumerically(">", before))
		}

		By(fmt.Sprintf("starting a %d-worker job with its page open", workers))
		succeed(mpiCmd("-n", ns, "run", "big", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", fmt.Sprint(workers), "--", "mpirun", "./a"))
		DeferCleanup(deleteAndWait, ns, "big")
		b.Open(framework.DashboardBase(url) + "/#/jobs/" + ns + "/big")
		Eventually(func() int {
			n := 0
			for _, p := range pods() {
				if p.Status.Phase == corev1.PodRunning {
					n++
				}
			}
			return n
		}, 15*time.Minute, 2*time.Second).Should(Equal(hosts))
		Eventually(b.Text, 2*time.Minute, 500*time.Millisecond).Should(ContainSubstring(fmt.Sprintf("All %d hosts", hosts)))
		settled()
		record(fmt.Sprintf("the job starts: its %d pods created and Running", hosts))

		By("changing every pod once")
		for _, p := range pods() {
			annotate(&p, "bench.torus-mpi.io/touched", "true")
		}
		settled()
		record(fmt.Sprintf("every pod changes once (%d changes)", hosts))

		By("timing the page's read of the job")
		token := url[strings.Index(url, "?token=")+len("?token="):]
		var reads []time.Duration
		for range 5 {
			req, err := http.NewRequest(http.MethodGet, framework.DashboardBase(url)+"/api/namespaces/"+ns+"/jobs/big", nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+token)
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			reads = append(reads, time.Since(start))
		}
		slices.Sort(reads)
		record("five reads of the job's view, timed")

		By("following the logs from the page")
		b.ClickText("Logs")
		Eventually(b.Text, time.Minute, 200*time.Millisecond).Should(ContainSubstring(fmt.Sprintf("8 of %d hosts", hosts)))
		Eventually(func() int {
			return len(slices.Compact(slices.Sorted(func(yield func(string) bool) {
				for _, r := range proxy.Matching(func(r framework.Request) bool { return strings.HasSuffix(r.Path, "/log") }) {
					if !yield(r.Path) {
						return
					}
				}
			})))
		}, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 8))
		time.Sleep(10 * time.Second) // what ten seconds of following cost
		record("ten seconds of following the logs")

		var out strings.Builder
		fmt.Fprintf(&out, "# What one open dashboard page of a %d-worker job costs the API server\n\n", workers)
		fmt.Fprintf(&out, "`make bench-dashboard-job` on the local cluster (kwok nodes, kube-scheduler, JobSet, the operator), the page open in headless Chromium; the dashboard's requests counted by a proxy between it and the API server. The job page's view read in %s (median of 5; fastest %s, slowest %s).\n\n",
			reads[2].Round(time.Millisecond), reads[0].Round(time.Millisecond), reads[4].Round(time.Millisecond))
		out.WriteString("| while | seconds | requests | lists of the job's pods | reads of the job | log streams | bytes from the API server |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, p := range phases {
			fmt.Fprintf(&out, "| %s | %.0f | %d | %d | %d | %d | %.1f MiB |\n", p.name, p.seconds, p.requests, p.podLists, p.jobReads, p.logStreams, float64(p.bytes)/(1<<20))
		}
		out.WriteString("\nThe requests by kind:\n\n")
		for _, p := range phases {
			kinds := slices.SortedFunc(maps.Keys(p.byKind), func(a, b string) int { return p.byKind[b] - p.byKind[a] })
			var parts []string
			for _, k := range kinds {
				parts = append(parts, fmt.Sprintf("%s %d", k, p.byKind[k]))
			}
			fmt.Fprintf(&out, "- %s: %s\n", p.name, strings.Join(parts, ", "))
		}
		GinkgoWriter.Print(out.String())
		if path := os.Getenv("TORUS_BENCH_OUT"); path != "" {
			Expect(os.WriteFile(path, []byte(out.String()), 0o644)).To(Succeed())
		}
	})
})

// requestKind is a request's verb and resource, as the API server's
// metrics name them: "LIST pods", "GET trainjobs", "WATCH events",
// "GET nodes/proxy".
func requestKind(r framework.Request) string {
	parts := strings.Split(strings.Trim(r.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	rest := parts[min(len(parts), 2):]
	if parts[0] == "apis" {
		rest = parts[min(len(parts), 3):]
	}
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	resource, named := "", false
	switch len(rest) {
	case 0:
		resource = r.Path // discovery
	case 1:
		resource = rest[0]
	case 2:
		resource, named = rest[0], true
	default:
		resource, named = rest[0]+"/"+rest[2], true
	}
	verb := r.Method
	switch {
	case r.Watch():
		verb = "WATCH"
	case r.Method == "GET" && !named && len(rest) > 0:
		verb = "LIST"
	}
	return verb + " " + resource
}
