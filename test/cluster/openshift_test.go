package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// grantSCC is what `oc adm policy add-scc-to-user torus-mpi-rdma -z default
// -n team-rdma` makes: the use of the SCC, for the namespace's default
// service account.
const grantSCC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:openshift:scc:torus-mpi-rdma"}
rules:
- {apiGroups: [security.openshift.io], resources: [securitycontextconstraints], resourceNames: [torus-mpi-rdma], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: "system:openshift:scc:torus-mpi-rdma", namespace: team-rdma}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:openshift:scc:torus-mpi-rdma"}
subjects:
- {kind: ServiceAccount, name: default, namespace: team-rdma}
`

// docSCC is the SCC docs/admins/openshift.md gives projects whose jobs
// attach RDMA networks: the first YAML block after its heading.
func docSCC() string {
	GinkgoHelper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "admins", "openshift.md"))
	Expect(err).NotTo(HaveOccurred())
	_, after, ok := strings.Cut(string(doc), "### InfiniBand and RoCE need more")
	Expect(ok).To(BeTrue())
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(after)
	Expect(m).NotTo(BeNil(), "no YAML block under the heading")
	return m[1]
}

// The cluster in its OpenShift mode: OpenShift's SCC admission decides
// every pod, restricted-v2 assigns UIDs from each namespace's range.
var _ = Describe("test/localcluster -openshift: OpenShift's SCC admission on real nodes", Ordered, ContinueOnFailure, func() {
	var dir string

	BeforeAll(func() {
		var before hostState
		dir, before = realNodeDir()
		DeferCleanup(func() { downLeavesNoTrace(dir, before) })
		out, code := clusterCmd(dir, "up", "-operator", operator, "-real-node", "-openshift")
		Expect(code).To(Equal(0), "cluster up -real-node -openshift failed:\n%s", out)
		out, code = kubectl(dir, "create", "namespace", "team-a")
		Expect(code).To(Equal(0), out)
	})

	DescribeTable("runs a default runtime's job to Complete under restricted-v2, as the UID it assigns from the namespace's range",
		func(runtime string, agent bool) {
			name := strings.TrimPrefix(strings.TrimSuffix(runtime, "-local"), "torus-")
			launch := []string{"--launch", "openssh"}
			if agent {
				// The init container from Torus's image, the agent on
				// the workers, as the UID restricted-v2 assigns.
				name += "-agent"
				launch = []string{"--launch", "agent", "--image", noSSHImage[runtime]}
			}
			var uidRange string
			Eventually(func() string {
				uidRange, _ = kubectl(dir, "get", "namespace", "team-a", "-o", `jsonpath={.metadata.annotations.openshift\.io/sa\.scc\.uid-range}`)
				return uidRange
			}, 30*time.Second, 200*time.Millisecond).Should(MatchRegexp(`^1\d{9}/10000$`), "the namespace got no UID range")
			first, _ := strconv.Atoi(strings.Split(uidRange, "/")[0])
			out, code := kubectlMPI(dir, slices.Concat([]string{"run", name, "-n", "team-a", "--runtime", runtime, "--workers", "2", "--slots-per-worker", "2",
				"--wait", "--timeout", "3m"}, launch, []string{"--", "sh", "-c", "id -u && exec " + strings.Join(piCommand[runtime], " ")})...)
			if code != 0 {
				Fail(fmt.Sprintf("the job did not complete (exit %d):\n%s\n%s", code, out, jobReportIn(dir, "team-a", name, nil)))
			}
			out, code = kubectlMPI(dir, "logs", name, "-n", "team-a", "--launcher")
			Expect(code).To(Equal(0), out)
			Expect(out).To(MatchRegexp(piResult))
			Expect(out).To(ContainSubstring(fmt.Sprintf("[launcher] %d\n", first)), "the launcher did not run as the first UID of %s", uidRange)
			out, _ = kubectl(dir, "get", "pods", "-n", "team-a", "-l", "jobset.sigs.k8s.io/jobset-name="+name,
				"-o", `jsonpath={range .items[*]}{.metadata.annotations.openshift\.io/scc}{"\n"}{end}`)
			Expect(strings.Fields(out)).To(HaveEach("restricted-v2"))
		},
		Entry("Open MPI 4 through the image's OpenSSH", "torus-openmpi-local", false),
		Entry("MPICH 4.2 through the image's OpenSSH", "torus-mpich-local", false),
		Entry("Open MPI 5 through the image's OpenSSH", "torus-openmpi5-local", false),
		Entry("Open MPI 4 through Torus's launch agent, no OpenSSH in the image", "torus-openmpi-local", true),
		Entry("MPICH 4.2 through Torus's launch agent, no OpenSSH in the image", "torus-mpich-local", true),
		Entry("Open MPI 5 through Torus's launch agent, no OpenSSH in the image", "torus-openmpi5-local", true),
	)

	It("refuses a job's pods that add IPC_LOCK in OpenShift's own words, and runs them once the SCC the docs give is granted", func() {
		out, code := kubectl(dir, "create", "namespace", "team-rdma")
		Expect(code).To(Equal(0), out)
		out, code = kubectlMPI(dir, "run", "rdma", "-n", "team-rdma", "--runtime", "torus-openmpi-local", "--network", "local-macvlan",
			"--workers", "2", "--slots-per-worker", "1", "--", "mpirun", "-n", "2", "hostname")
		Expect(code).To(Equal(0), out)
		Eventually(func() string { return runningIn(dir, "team-rdma", "rdma").Message }, time.Minute, time.Second).Should(And(
			ContainSubstring("unable to validate against any security context constraint"), ContainSubstring("IPC_LOCK")))

		By("granting the SCC of docs/admins/openshift.md to the namespace's default service account")
		manifest := filepath.Join(dir, "rdma-scc.yaml")
		Expect(os.WriteFile(manifest, []byte(docSCC()+"---\n"+grantSCC), 0o644)).To(Succeed())
		out, code = kubectl(dir, "apply", "-f", manifest)
		Expect(code).To(Equal(0), out)
		// The workers' pods go as soon as the job completes (the JobSet
		// deletes the Jobs still active), before or after a read that
		// follows the wait: which SCC admitted them is read while they run.
		workers := "jobset.sigs.k8s.io/jobset-name=rdma,jobset.sigs.k8s.io/replicatedjob-name=node"
		sccs := map[string]string{}
		Eventually(func(g Gomega) {
			out, code := kubectl(dir, "get", "pods", "-n", "team-rdma", "-l", workers,
				"-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.annotations.openshift\.io/scc}{"\n"}{end}`)
			g.Expect(code).To(Equal(0), out)
			for _, l := range strings.Fields(out) {
				pod, scc, _ := strings.Cut(l, "=")
				sccs[pod] = scc
			}
			g.Expect(len(sccs)).To(BeNumerically(">=", 2), "the job's two workers admitted")
		}, 4*time.Minute, time.Second).Should(Succeed(), func() string { return jobReportIn(dir, "team-rdma", "rdma", nil) })
		out, code = kubectlMPI(dir, "wait", "rdma", "-n", "team-rdma", "--timeout", "4m")
		if code != 0 {
			Fail(fmt.Sprintf("the job did not complete once the SCC was granted (exit %d):\n%s\n%s", code, out, jobReportIn(dir, "team-rdma", "rdma", nil)))
		}
		for pod, scc := range sccs {
			Expect(scc).To(Equal("torus-mpi-rdma"), "the SCC that admitted worker %s", pod)
		}
	})
})
