package e2e

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/framework"
)

var _ = Describe("kubectl mpi dashboard", func() {
	It("shows a 256-worker job's hosts as counts by state first, and every host on demand", func() {
		ns := newNamespace("dash")
		succeed(mpiCmd("-n", ns, "run", "wide", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "256", "--", "mpirun", "./a"))
		DeferCleanup(func() { mpiCmd("-n", ns, "delete", "wide") })
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
})
