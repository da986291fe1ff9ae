package e2e

import (
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/test/framework"
)

var _ = Describe("kubectl mpi dashboard", func() {
	It("shows a 256-worker job's hosts as counts by state first, and every host on demand", func() {
		ns := newNamespace("dash")
		succeed(mpiCmd("-n", ns, "run", "wide", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "256", "--", "mpirun", "./a"))
		DeferCleanup(deleteAndWait, ns, "wide")
		url := framework.StartDashboard(pluginBinary(), clusterKubeconfig(), "-n", ns)
		b := framework.NewBrowser(filepath.Join(framework.RepoRoot(), ".artifacts", "dashboard"))
		b.Open(url)
		b.Open(framework.DashboardBase(url) + "/#/jobs/" + ns + "/wide")
		Eventually(b.Text, time.Minute, 200*time.Millisecond).Should(ContainSubstring("All 257 hosts"))
		Expect(b.Count(".torus-host")).To(BeNumerically("<", 257), "every host drawn before any was asked for")
		Expect(b.Count(`[aria-label="Hosts by state"] .pf-v6-c-label`)).To(BeNumerically(">=", 1), "no counts by state")
		framework.ExpectAccessible(b, "256-worker job")
		b.Screenshot("wide")
		b.ClickText("All 257 hosts")
		Eventually(func() int { return b.Count(".torus-host") }, 30*time.Second, 200*time.Millisecond).Should(Equal(257))
		framework.ExpectAccessible(b, "256-worker job, every host")
	})

	It("costs the API server one list of a 256-worker job's pods however often they change, and follows 8 hosts' logs", func() {
		ns := newNamespace("dashcost")
		succeed(mpiCmd("-n", ns, "run", "wide", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "256", "--", "mpirun", "./a"))
		DeferCleanup(deleteAndWait, ns, "wide")
		succeed(mpiCmd("-n", ns, "wait", "wide", "--for=condition=Running", "--timeout", "180s"))
		// The dashboard reaches the API server through a proxy that
		// records what it asks.
		proxy := framework.NewRecordingProxy(restConfig)
		url := framework.StartDashboard(pluginBinary(), proxy.Kubeconfig(GinkgoT().TempDir()), "-n", ns)
		podLists := func(r framework.Request) bool {
			return r.Method == "GET" && !r.Watch() && r.Path == "/api/v1/namespaces/"+ns+"/pods" && strings.Contains(r.Query.Get("labelSelector"), api.LabelJobName+"=wide")
		}
		jobReads := func(r framework.Request) bool {
			return r.Method == "GET" && strings.HasSuffix(r.Path, "/namespaces/"+ns+"/trainjobs/wide")
		}
		logStreams := func(r framework.Request) bool {
			return r.Method == "GET" && strings.HasPrefix(r.Path, "/api/v1/namespaces/"+ns+"/pods/") && strings.HasSuffix(r.Path, "/log")
		}
		b := framework.NewBrowser(filepath.Join(framework.RepoRoot(), ".artifacts", "dashboard"))
		b.Open(url)
		b.Open(framework.DashboardBase(url) + "/#/jobs/" + ns + "/wide")
		Eventually(b.Text, time.Minute, 200*time.Millisecond).Should(ContainSubstring("All 257 hosts"))
		// The page's stream tells it to read again once the dashboard holds
		// the job's pods: that second read, and every one after it, takes
		// them from there. The first may have listed them.
		Eventually(func() int { return proxy.Count(jobReads) }, time.Minute, 100*time.Millisecond).Should(BeNumerically(">=", 2))

		By("changing each of the job's 257 pods while its page is open")
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{api.LabelJobName: "wide"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(257))
		// The page's watch connects again when the API server ends one of
		// its watches (a timeout, more often under load); a new connection
		// may list the job's pods, twice at most: whether the user may,
		// and a read before its watch of them has caught up.
		connects := func(r framework.Request) bool {
			return r.Watch() && strings.HasSuffix(r.Path, "/namespaces/"+ns+"/trainjobs") && r.Query.Get("fieldSelector") == ""
		}
		lists, reads, connected := proxy.Count(podLists), proxy.Count(jobReads), proxy.Count(connects)
		for i := range pods.Items {
			annotate(&pods.Items[i], "e2e.torus-mpi.io/touched", "true")
		}
		// One change more, made after counting: the page reads the job
		// again once that change, the last, reached it.
		afterChanges := proxy.Count(jobReads)
		annotate(&pods.Items[0], "e2e.torus-mpi.io/touched", "again")
		Eventually(func() int { return proxy.Count(jobReads) }, time.Minute, 100*time.Millisecond).Should(BeNumerically(">", afterChanges))
		reconnects := proxy.Count(connects) - connected
		Expect(proxy.Count(podLists)-lists).To(BeNumerically("<=", 2*reconnects),
			"the page listed the job's pods again on a change (its watch connected again %d times)", reconnects)
		GinkgoWriter.Printf("257 pod changes: %d reads of the job by the page, %d lists of its pods in all\n", proxy.Count(jobReads)-reads, proxy.Count(podLists))

		By("following the logs of the first 8 hosts, and saying so")
		b.ClickText("Logs")
		Eventually(b.Text, time.Minute, 200*time.Millisecond).Should(ContainSubstring("8 of 257 hosts"))
		streamed := func() map[string]bool {
			pods := map[string]bool{}
			for _, r := range proxy.Matching(logStreams) {
				pods[r.Path] = true
			}
			return pods
		}
		Eventually(func() int { return len(streamed()) }, time.Minute, 100*time.Millisecond).Should(BeNumerically(">=", 8))
		Expect(streamed()).To(HaveLen(8), "the page follows the logs of the first 8 hosts alone")
		framework.ExpectAccessible(b, "256-worker job, logs of the first hosts")
	})
})
