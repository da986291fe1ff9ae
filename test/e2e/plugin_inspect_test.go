package e2e

import (
	"encoding/json"
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// fields splits table output into rows of columns.
func fields(table string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// rowOf finds the table row that starts with a name.
func rowOf(table, name string) []string {
	for _, r := range fields(table) {
		if len(r) > 0 && r[0] == name {
			return r
		}
	}
	return nil
}

var _ = Describe("kubectl mpi list, describe, wait, rerun and delete", Ordered, func() {
	var ns string

	BeforeAll(func() {
		installSampleRuntimes()
		ns = newNamespace("plugin-inspect")
		newQueue(ns, 4)
		// "holder" holds all 4 GPUs of the queue; "queued" waits for them.
		succeed(mpiCmd("-n", ns, "run", "holder", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "1",
			"--gpus", "4", "--memory", "1Gi", "--queue", "team", "--", "mpirun", "./train"))
		Eventually(condition(trainJobRef(ns, "holder"), trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		succeed(mpiCmd("-n", ns, "run", "queued", "--image", "img", "--runtime", "torus-openmpi-e2e", "--workers", "1",
			"--slots-per-worker", "4", "--gpus", "4", "--queue", "team", "--", "mpirun", "./train"))
		// Queued in Kueue with Kueue's reason, not only waiting for Kueue to
		// take the job up: the specs read what Kueue says of it.
		Eventually(condition(trainJobRef(ns, "queued"), trainjob.ConditionAdmitted), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", And(HavePrefix(`Waiting in LocalQueue "team": `), ContainSubstring("nvidia.com/gpu")))))
	})

	It("lists MPI jobs with state, workers ready, slots, restarts, progress, queue and age", func() {
		r := succeed(mpiCmd("-n", ns, "list"))
		rows := fields(r.Stdout)
		Expect(rows[0]).To(Equal([]string{"NAME", "STATE", "WORKERS", "SLOTS", "RESTARTS", "PROGRESS", "TIME", "LEFT", "QUEUE", "DURATION", "AGE"}))
		// One slot per GPU when the runtime says one slot per node. The
		// duration counts from Kueue's admission: none for a queued job.
		holder := rowOf(r.Stdout, "holder")
		// No program on kwok nodes reports progress.
		Expect(holder[:8]).To(Equal([]string{"holder", "Running", "1/1", "4", "0", "<none>", "<none>", "team"}))
		// A duration as kubectl shows one: seconds for the first two
		// minutes, which a loaded cluster may take to get here.
		Expect(holder[8]).To(MatchRegexp(`^(\d+[dhms])+$`))
		Expect(rowOf(r.Stdout, "queued")[:9]).To(Equal([]string{"queued", "Queued", "0/1", "4", "0", "<none>", "<none>", "team", "<none>"}))

		r = succeed(mpiCmd("list", "-A", "-o", "wide"))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^%s\s+queued\s+Queued\s+0/1\s+4\s+0\s+<none>\s+<none>\s+team\s+<none>\s+\S+\s+OpenMPI\s+torus-openmpi-e2e\s+\S+\s+Waiting in LocalQueue "team"`, ns))

		r = succeed(mpiCmd("-n", ns, "list", "-o", "json"))
		var list trainer.TrainJobList
		Expect(json.Unmarshal([]byte(r.Stdout), &list)).To(Succeed())
		Expect(list.Items).To(HaveLen(2))
		Expect(list.Kind).To(Equal("TrainJobList"))

		r = succeed(mpiCmd("-n", ns, "list", "-o", "name", "-l", mpi.KueueQueueLabel+"=team"))
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/holder\ntrainjob.trainer.kubeflow.org/queued\n"))
		r = succeed(mpiCmd("-n", ns, "list", "-l", "team=nobody"))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(Equal(fmt.Sprintf("No MPI jobs found in %s namespace.\n", ns)))
	})

	It("describes why a job waits, from Kueue", func() {
		r := succeed(mpiCmd("-n", ns, "describe", "queued"))
		first := strings.Join(strings.Split(r.Stdout, "\n")[:6], "\n")
		Expect(first).To(MatchRegexp(`State:\s+Queued for \S+`))
		Expect(first).To(MatchRegexp(`Waiting:\s+Waiting in LocalQueue "team": .*nvidia.com/gpu`))
		Expect(r.Stdout).To(MatchRegexp(`Queue:\s+team \(Queued\)`))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^\s+0-3\s+worker-0\s+<none>\s+NotCreated`))
	})

	It("waits with exit codes: 0 reached, 4 timed out, 3 failed", func() {
		r := succeed(mpiCmd("-n", ns, "wait", "holder", "--for=condition=Running"))
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/holder condition met: Running\n"))

		// The 2 s count from the command's start: a loaded API server may
		// keep it from reading the job within them, and a command that
		// never read the job cannot say what state it is in.
		Eventually(func(g Gomega) {
			r := mpiCmd("-n", ns, "wait", "holder", "--for=condition=Complete", "--timeout", "2s")
			g.Expect(r.Code).To(Equal(4), r.Stderr)
			g.Expect(r.Stderr).To(ContainSubstring("error: timed out after 2s waiting for MPI job holder to be Complete; it is Running: Launcher running, 1/1 workers ready"))
		}, timeout, interval).Should(Succeed())

		inject(runningPod(trainJobRef(ns, "holder"), api.RoleWorker, 0), "oom")
		r = mpiCmd("-n", ns, "wait", "holder", "--for=condition=Complete", "--timeout", timeout.String())
		Expect(r.Code).To(Equal(3))
		Expect(r.Stderr).To(ContainSubstring("error: MPI job holder failed: worker-0 (ranks 0-3) OOMKilled: memory limit 1Gi exceeded; raise --memory"))
		succeed(mpiCmd("-n", ns, "wait", "holder", "--for=condition=Failed"))
	})

	It("puts the failing rank, the reason and the fix in the first 10 lines of describe", func() {
		// The operator records its Failed event after the status the last
		// spec's wait saw.
		Eventually(func(g Gomega) {
			r := mpiCmd("-n", ns, "describe", "holder")
			g.Expect(r.Code).To(Equal(0), r.Stderr)
			lines := strings.Split(r.Stdout, "\n")
			g.Expect(len(lines)).To(BeNumerically(">=", 10), r.Stdout)
			first := strings.Join(lines[:10], "\n")
			g.Expect(first).To(MatchRegexp(`State:\s+Failed for`))
			g.Expect(first).To(MatchRegexp(`Failed rank:\s+worker-0 \(ranks 0-3\), pod holder-node-0-0-\S+ on node kwok-node-\d`))
			g.Expect(first).To(MatchRegexp(`Reason:\s+OOMKilled: memory limit 1Gi exceeded`))
			g.Expect(first).To(MatchRegexp(`Fix:\s+raise --memory`))
			g.Expect(r.Stdout).To(MatchRegexp(`(?m)^\s+Failed\s+True\s+Failed`))
			g.Expect(r.Stdout).To(MatchRegexp(`(?m)Warning\s+Failed\s+trainjob/holder`))
		}, timeout, interval).Should(Succeed())
	})

	It("runs the queued job once the quota is free", func() {
		succeed(mpiCmd("-n", ns, "wait", "queued", "--for=condition=Complete", "--timeout", "90s"))
		r := mpiCmd("-n", ns, "wait", "queued", "--for=condition=Failed")
		Expect(r.Code).To(Equal(3))
		Expect(r.Stderr).To(ContainSubstring("MPI job queued is Complete and will not become Failed"))
	})

	It("reruns a failed job with changes, recording its origin", func() {
		r := succeed(mpiCmd("-n", ns, "rerun", "holder", "--memory", "2Gi", "--runtime", "torus-openmpi-e2e", "--wait", "--timeout", "90s"))
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/holder-2 created\n"))
		var tj trainer.TrainJob
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "holder-2"}, &tj)).To(Succeed())
		Expect(tj.Annotations).To(HaveKeyWithValue(api.AnnotationRerunOf, "holder"))
		Expect(tj.Labels).To(HaveKeyWithValue(mpi.KueueQueueLabel, "team"))
		Expect(tj.Spec.Trainer.ResourcesPerNode.Limits.Memory().String()).To(Equal("2Gi"))
		Expect(tj.Spec.Trainer.Image).To(HaveValue(Equal("img")))
		Expect(succeed(mpiCmd("-n", ns, "describe", "holder-2")).Stdout).To(MatchRegexp(`Rerun of:\s+holder`))

		r = succeed(mpiCmd("-n", ns, "rerun", "holder-2", "--dry-run=client", "-o", "name"))
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/holder-3\n"), "-o name prints names only")
	})

	It("says when a job does not exist, whatever the command", func() {
		for _, args := range [][]string{
			{"describe", "nope"}, {"logs", "nope"}, {"wait", "nope"}, {"delete", "nope"}, {"top", "nope"},
			{"rerun", "nope"}, {"exec-rank", "nope", "0", "--", "true"},
		} {
			r := mpiCmd(append([]string{"-n", ns}, args...)...)
			Expect(r.Code).To(Equal(1), "%v", args)
			Expect(r.Stderr).To(Equal(fmt.Sprintf("error: MPI job \"nope\" not found in namespace %q: see kubectl mpi list (-A for every namespace)\n", ns)), "%v", args)
		}
	})

	It("deletes jobs by name, or all of them, and waits until they are gone", func() {
		r := succeed(mpiCmd("-n", ns, "delete", "holder", "--wait", "--timeout", timeout.String()))
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/holder deleted\n"))
		r = succeed(mpiCmd("-n", ns, "delete", "--all", "--wait", "--timeout", timeout.String()))
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/holder-2 deleted\ntrainjob.trainer.kubeflow.org/queued deleted\n"))
		var list trainer.TrainJobList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())
		Expect(succeed(mpiCmd("-n", ns, "list")).Stderr).To(ContainSubstring("No MPI jobs found"))
	})
})
