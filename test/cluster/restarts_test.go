package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/pkg/trainjob"
)

// train is the command of the reference training on 4 ranks, trained to
// out.
func train(out string, more ...string) []string {
	return append([]string{"--", "mpirun", "-n", "4", "python3", "/opt/torus/train.py", "--epochs", "12", "--output", out}, more...)
}

// modelSHA finds the checksum the reference training prints of its model.
var modelSHA = regexp.MustCompile(`model saved to \S+ \(sha256 ([0-9a-f]{64})\)`)

// straightSHA is the checksum of the reference training's model trained
// straight through, once per run of the tier (straightModel).
var straightSHA string

// straightModel trains the reference training straight through, without
// checkpoints, onto claim, unless an earlier spec of the run has: every
// interrupted training must end with its model.
func straightModel(dir, claim string) string {
	GinkgoHelper()
	if straightSHA != "" {
		return straightSHA
	}
	By("training straight through, without checkpoints")
	out, code := kubectlMPI(dir, append([]string{"run", "straight", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
		"--volume", "pvc:" + claim + ":/out", "--wait", "--timeout", "6m"}, train("/out/straight.npz")...)...)
	if code != 0 {
		Fail(fmt.Sprintf("the straight training did not complete (exit %d):\n%s\n%s", code, out, jobReport(dir, "straight", nil)))
	}
	logs, _ := kubectlMPI(dir, "logs", "straight", "--launcher")
	m := modelSHA.FindStringSubmatch(logs)
	Expect(m).NotTo(BeNil(), logs)
	kubectlMPI(dir, "delete", "straight")
	straightSHA = m[1]
	return straightSHA
}

// localClaim makes a ReadWriteMany claim of the local cluster's: one
// directory of the machine's that every real node mounts, as a shared file
// system's. Each job that keeps checkpoints has its own; the cluster's
// volumes are each bound once (test/localcluster's localVolumes), and the claim
// is bound before a job mounts it.
func localClaim(dir, name string) {
	GinkgoHelper()
	defer func() {
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "pvc", name, "-o", "jsonpath={.status.phase}")
			return out
		}, time.Minute, time.Second).Should(Equal("Bound"), func() string {
			out, _ := kubectl(dir, "get", "pv,pvc", "-A")
			return "claim " + name + " did not bind: a volume for each claim the tier makes (test/localcluster's localVolumes)\n" + out
		})
	}()
	apply(dir, &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To("local"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
		},
	})
	DeferCleanup(func() { kubectl(dir, "delete", "pvc", name, "--wait=false") })
}

// trainWithCheckpoints runs the reference training as job name, keeping
// checkpoints on claim with no restart budget, follows its logs, and
// returns once its first run has saved a checkpoint past epoch 3.
func trainWithCheckpoints(dir, name, claim string) *background {
	GinkgoHelper()
	out, code := kubectlMPI(dir, append([]string{"run", name, "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
		"--checkpoint-volume", claim, "--max-restarts", "0"}, train("/checkpoint/model.npz", "--pace", "2")...)...)
	Expect(code).To(Equal(0), out)
	logs := kubectlMPIInBackground(dir, "logs", name, "-f")
	Eventually(func() string {
		out, _ := kubectlMPI(dir, "logs", name, "--launcher")
		return out
	}, 4*time.Minute, time.Second).Should(MatchRegexp(`checkpoint saved after epoch [3-9]`), func() string { return "no checkpoint:\n" + jobReport(dir, name, nil) })
	return logs
}

// expectResumed checks that job name's second run went on from its first
// run's checkpoint, epoch after epoch, to the model trained straight
// through.
func expectResumed(dir, name, straight string) {
	GinkgoHelper()
	run, _ := kubectlMPI(dir, "logs", name, "--launcher")
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
	m := modelSHA.FindStringSubmatch(run)
	Expect(m).NotTo(BeNil(), run)
	Expect(m[1]).To(Equal(straight), "the resumed training ended with another model than the straight one")
}

// realNodeRestarts trains the reference training on the real nodes once
// straight through, and once losing a worker mid-run: the job restarts its
// whole world and resumes from its last checkpoint, to the same model.
func realNodeRestarts(dirp *string) {
	Context("a training that loses a worker or its launcher on the real nodes, or is preempted, and one that always fails", Ordered, func() {
		var dir, straight string

		BeforeAll(func() {
			dir = *dirp
			localClaim(dir, "restarts-worker")
			localClaim(dir, "restarts-launcher")
			straight = straightModel(dir, "restarts-worker")
		})

		// loseMidTraining trains with no restart budget at all, deletes the
		// pod of replicatedJob's index once the run has saved a checkpoint,
		// and checks that the job restarted without spending the budget,
		// resumed from the checkpoint and ended with the straight model;
		// describe's cause of the restart must match cause.
		loseMidTraining := func(name, replicatedJob, index, cause string) {
			GinkgoHelper()
			DeferCleanup(func() { kubectlMPI(dir, "delete", name) })
			By("the pod deleted once the run has saved a checkpoint")
			logs := trainWithCheckpoints(dir, name, "restarts-"+replicatedJobRole(replicatedJob))
			pod, _ := kubectl(dir, "get", "pods", "-o", "name", "-l",
				"jobset.sigs.k8s.io/jobset-name="+name+",jobset.sigs.k8s.io/replicatedjob-name="+replicatedJob+",jobset.sigs.k8s.io/restart-attempt=0,batch.kubernetes.io/job-completion-index="+index)
			Expect(strings.TrimSpace(pod)).NotTo(BeEmpty())
			out, code := kubectl(dir, "delete", strings.TrimSpace(pod), "--wait=false")
			Expect(code).To(Equal(0), out)

			By("the job restarted, not failed, and completes")
			out, code = kubectlMPI(dir, "wait", name, "--timeout", "6m")
			if code != 0 {
				Fail(fmt.Sprintf("the job did not complete after its pod was deleted (exit %d):\n%s\n%s", code, out, jobReport(dir, name, logs)))
			}
			restarts, _ := kubectl(dir, "get", "jobset", name, "-o", "jsonpath={.status.restarts}")
			Expect(restarts).To(Equal("1"))
			counted, _ := kubectl(dir, "get", "jobset", name, "-o", "jsonpath={.status.restartsCountTowardsMax}")
			Expect(counted).To(Or(BeEmpty(), Equal("0")), "the pod's loss was counted as the program's failure")

			By("describe says the job restarted once, uncounted, and why")
			describe, _ := kubectlMPI(dir, "describe", name)
			Expect(describe).To(ContainSubstring("Restarts: 1, 0 counted against the budget of 0"))
			Expect(describe).To(MatchRegexp(`run 0 stopped \S+ \(not counted\): (%s)`, cause))

			By("the second run resumed from the checkpoint, to the model trained straight through")
			expectResumed(dir, name, straight)
		}

		It("restarts the whole world without spending its budget when a worker's pod is deleted, and resumes to the same model", func() {
			// The deleted worker's word, or the launcher's that lost it,
			// whichever the operator saw first.
			loseMidTraining("lost-worker", "node", "1",
				`worker-1 \(ranks 2-3\) Stopped: its pod was stopped while it ran the job's ranks|launcher WorldLost: `)
		})

		It("restarts the whole world without spending its budget when the launcher's pod is deleted, and resumes to the same model", func() {
			loseMidTraining("lost-launcher", "launcher", "0", `launcher WorldLost: `)
		})

		It("stops a training that Kueue preempts for a job of higher priority, and resumes it from its checkpoint once readmitted, to the same model", func() {
			queue := filepath.Join(dir, "preempt.yaml")
			Expect(os.WriteFile(queue, []byte(preemptQueue), 0o644)).To(Succeed())
			out, code := kubectl(dir, "apply", "-f", queue)
			Expect(code).To(Equal(0), out)
			DeferCleanup(func() { kubectl(dir, "delete", "-f", queue, "--wait=false") })
			localClaim(dir, "restarts-preempt")
			DeferCleanup(func() { kubectlMPI(dir, "delete", "preempted"); kubectlMPI(dir, "delete", "urgent") })

			// 2 workers of 400m: 800m of the queue's 1 CPU, with no budget
			// for restarts.
			out, code = kubectlMPI(dir, append([]string{"run", "preempted", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
				"--cpu", "400m", "--queue", "preempt", "--priority", "torus-test-low", "--checkpoint-volume", "restarts-preempt", "--max-restarts", "0"},
				train("/checkpoint/model.npz", "--pace", "2")...)...)
			Expect(code).To(Equal(0), out)
			logs := kubectlMPIInBackground(dir, "logs", "preempted", "-f")
			Eventually(func() string {
				out, _ := kubectlMPI(dir, "logs", "preempted", "--launcher")
				return out
			}, 4*time.Minute, time.Second).Should(MatchRegexp(`checkpoint saved after epoch [3-9]`), func() string { return "no checkpoint:\n" + jobReport(dir, "preempted", nil) })

			By("a job of higher priority that does not fit beside it: Kueue preempts the training")
			out, code = kubectlMPI(dir, "run", "urgent", "--runtime", "torus-openmpi-local", "--workers", "1", "--slots-per-worker", "1",
				"--cpu", "400m", "--queue", "preempt", "--priority", "torus-test-high", "--", "mpirun", "-n", "1", "python3", "/opt/torus/pi.py", "20000")
			Expect(code).To(Equal(0), out)
			// The event stays, where Admitted=False reason Evicted lasts only
			// until Kueue admits the training again.
			Eventually(func() string {
				out, _ := kubectl(dir, "get", "events", "--field-selector", "involvedObject.kind=TrainJob,involvedObject.name=preempted,reason=Requeued",
					"-o", "jsonpath={.items[*].message}")
				return out
			}, 2*time.Minute, time.Second).Should(ContainSubstring("Kueue evicted the job (Preempted: "), func() string { return "the training was not preempted:\n" + jobReport(dir, "preempted", nil) })
			out, code = kubectlMPI(dir, "wait", "urgent", "--timeout", "4m")
			Expect(code).To(Equal(0), "the job of higher priority did not complete:\n%s\n%s", out, jobReport(dir, "urgent", nil))

			By("readmitted, the training resumes from its checkpoint and completes")
			out, code = kubectlMPI(dir, "wait", "preempted", "--timeout", "6m")
			if code != 0 {
				Fail(fmt.Sprintf("the preempted training did not complete (exit %d):\n%s\n%s", code, out, jobReport(dir, "preempted", logs)))
			}
			By("describe keeps the preemption among the job's restarts, not counted, in Kueue's words")
			describe, _ := kubectlMPI(dir, "describe", "preempted")
			Expect(describe).To(MatchRegexp(`Restarts: \d+, 0 counted against the budget of 0; evicted by Kueue: 1\n`), describe)
			Expect(describe).To(MatchRegexp(`run 0 stopped \S+ \(evicted by Kueue\): Preempted: `), describe)
			run, _ := kubectlMPI(dir, "logs", "preempted", "--launcher")
			Expect(run).To(MatchRegexp(`training from the checkpoint after epoch ([3-9]|1[01])`))
			m := modelSHA.FindStringSubmatch(run)
			Expect(m).NotTo(BeNil(), run)
			Expect(m[1]).To(Equal(straight), "the preempted training ended with another model than the straight one")
		})

		It("fails a program that always fails once its budget is spent, saying why each run stopped", func() {
			DeferCleanup(func() { kubectlMPI(dir, "delete", "always-fails") })
			out, code := kubectlMPI(dir, "run", "always-fails", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "1",
				"--max-restarts", "1", "--wait", "--timeout", "6m", "--",
				"mpirun", "-n", "2", "python3", "-c", "import sys; print('the program gives up', flush=True); sys.exit(3)")
			Expect(code).NotTo(Equal(0), out)
			describe, _ := kubectlMPI(dir, "describe", "always-fails")
			Expect(describe).To(MatchRegexp(`State:\s+Failed`), describe)
			failed, _ := kubectl(dir, "get", "trainjob", "always-fails", "-o", `jsonpath={.status.conditions[?(@.type=="Failed")].message}`)
			Expect(failed).To(HavePrefix("After 1 restart, 1 counted against the budget of 1 (kubectl mpi describe always-fails says why each run stopped): launcher Error: container node exited with code 3"))
			Expect(describe).To(ContainSubstring("Restarts: 1, 1 counted against the budget of 1"), describe)
			Expect(describe).To(MatchRegexp(`run 0 stopped \S+ \(counted\): launcher Error: container node exited with code 3`), describe)
		})
	})
}

// realNodeBackoff loses a worker of a job outside Kueue twice in a row:
// the first restart starts the new run at once, the second waits out the
// back-off (its JobSet suspended by Torus, which the controller suite
// checks) before its pods are made.
func realNodeBackoff(dirp *string) {
	It("holds a job outside Kueue back after its second restart in a row that was not the program's: the new run's pods are made, and run, only once the back-off ends", func() {
		dir := *dirp
		const name = "backoff"
		DeferCleanup(func() { kubectlMPI(dir, "delete", name) })
		out, code := kubectlMPI(dir, "run", name, "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "1",
			"--max-restarts", "0", "--", "mpirun", "-n", "2", "sleep", "600")
		Expect(code).To(Equal(0), out)

		// runs waits until run n's world runs, and returns when the
		// Running condition said so.
		runs := func(n int) time.Time {
			GinkgoHelper()
			want := "Launcher running, 2/2 workers ready"
			if n > 0 {
				want += fmt.Sprintf(" (run %d)", n)
			}
			var since time.Time
			Eventually(func(g Gomega) {
				out, _ := kubectl(dir, "get", "trainjob", name, "-o", `jsonpath={.status.conditions[?(@.type=="Running")]}`)
				var c metav1.Condition
				g.Expect(json.Unmarshal([]byte(out), &c)).To(Succeed(), out)
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(c.Message).To(Equal(want))
				since = c.LastTransitionTime.Time
			}, 4*time.Minute, time.Second).Should(Succeed(), func() string { return jobReport(dir, name, nil) })
			return since
		}
		// lose deletes run n's second worker.
		lose := func(n int) {
			GinkgoHelper()
			pod, _ := kubectl(dir, "get", "pods", "-o", "name", "-l", fmt.Sprintf(
				"jobset.sigs.k8s.io/jobset-name=%s,jobset.sigs.k8s.io/replicatedjob-name=node,jobset.sigs.k8s.io/restart-attempt=%d,batch.kubernetes.io/job-completion-index=1", name, n))
			Expect(strings.TrimSpace(pod)).NotTo(BeEmpty())
			out, code := kubectl(dir, "delete", strings.TrimSpace(pod), "--wait=false")
			Expect(code).To(Equal(0), out)
		}

		runs(0)
		By("the first loss: the new run starts at once")
		lose(0)
		runs(1)

		By("the second in a row: the new run waits out the back-off, counted from the restart, before its pods are made")
		lose(1)
		ran := runs(2)
		out, _ = kubectl(dir, "get", "trainjob", name, "-o", "json")
		var tj trainer.TrainJob
		Expect(json.Unmarshal([]byte(out), &tj)).To(Succeed())
		rec := trainjob.RestartsOf(&tj)
		wait, streak := rec.Backoff()
		Expect(streak).To(Equal(2), "record: %+v", rec)
		Expect(wait).To(Equal(trainjob.RestartBackoffBase))
		last, ok := rec.LatestRestart()
		Expect(ok).To(BeTrue())
		// The record keeps whole seconds: the back-off ended at or after
		// this moment.
		until := last.At.Add(wait)
		Expect(ran).To(BeTemporally(">=", until), "run 2 ran before its back-off ended")
		// Pods of run 2 made before Torus suspended the JobSet, if any,
		// are being deleted; the run's world is the others.
		out, code = kubectl(dir, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name="+name+",jobset.sigs.k8s.io/restart-attempt=2", "-o", "json")
		Expect(code).To(Equal(0), out)
		var pods corev1.PodList
		Expect(json.Unmarshal([]byte(out), &pods)).To(Succeed())
		var world []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				world = append(world, p)
			}
		}
		Expect(world).To(HaveLen(3), "run 2's launcher and workers")
		for _, p := range world {
			Expect(p.CreationTimestamp.Time).To(BeTemporally(">=", until.Add(-time.Second)),
				"pod %s of run 2 was made before the back-off ended at %s: the JobSet was not held", p.Name, until)
		}
		describe, _ := kubectlMPI(dir, "describe", name)
		Expect(describe).To(ContainSubstring("Restarts: 2, 0 counted against the budget of 0"), describe)
	})
}

// preemptQueue is a queue of 1 CPU where a job of torus-test-high
// preempts one of torus-test-low that leaves it no room.
const preemptQueue = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: torus-test-low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: torus-test-high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: preempt}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: preempt}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: preempt
      resources:
      - {name: cpu, nominalQuota: "1"}
      - {name: memory, nominalQuota: 16Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: preempt, namespace: default}
spec: {clusterQueue: preempt}
`

// replicatedJobRole names the claim of a loseMidTraining job.
func replicatedJobRole(replicatedJob string) string {
	if replicatedJob == "launcher" {
		return "launcher"
	}
	return "worker"
}

// realNodeLost loses a real node mid-training: its kubelet and containerd
// end, and every container of its with them, as when the machine dies.
// Kubernetes keeps a dead node's pods until the node is deleted (as a
// cloud's node controller, or an autoscaler, deletes the Node of a machine
// that is gone) or tainted out-of-service; the new run waits for them, then
// runs on the node left. It ends the node for good, so it runs last.
func realNodeLost(dirp *string) {
	It("restarts the whole world on the node left when a worker's node dies, once Kubernetes lets its pods go, and resumes to the same model", func() {
		dir := *dirp
		const name = "lost-node"
		localClaim(dir, "restarts-node")
		straight := straightModel(dir, "restarts-node")
		DeferCleanup(func() { kubectlMPI(dir, "delete", name) })
		logs := trainWithCheckpoints(dir, name, "restarts-node")

		// The node to lose is the one without the launcher, which finds
		// its world lost and restarts the job while Kubernetes still keeps
		// the dead node's pods: the new run must wait for them.
		out, code := kubectl(dir, "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.labels.jobset\.sigs\.k8s\.io/replicatedjob-name}/{.metadata.labels.batch\.kubernetes\.io/job-completion-index} {.spec.nodeName}{"\n"}{end}`,
			"-l", "jobset.sigs.k8s.io/jobset-name="+name+",jobset.sigs.k8s.io/restart-attempt=0")
		Expect(code).To(Equal(0), out)
		placed := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			Expect(f).To(HaveLen(2), out)
			placed[f[0]] = f[1]
		}
		Expect(placed).To(HaveLen(3), out)
		left := placed["launcher/0"]
		lost := "real-node-0"
		if left == lost {
			lost = "real-node-1"
		}
		Expect([]string{placed["node/0"], placed["node/1"]}).To(ConsistOf(left, lost), "the workers are not one on each node:\n%s", out)

		By("the node without the launcher, " + lost + ", dies: its containerd, kubelet and policy agent are killed, and its containers end with them")
		pids := readPIDs(dir)
		suffix := strings.TrimPrefix(lost, "real-node")
		for _, comp := range []string{"containerd", "kubelet", "kube-router"} {
			r, ok := pids[comp+suffix]
			Expect(ok).To(BeTrue(), "no PID recorded for %s%s", comp, suffix)
			Expect(syscall.Kill(r.PID, syscall.SIGKILL)).To(Succeed())
		}
		for _, comp := range []string{"containerd", "kubelet", "kube-router"} {
			r := pids[comp+suffix]
			Eventually(r.Alive, 30*time.Second).Should(BeFalse(), "%s%s (pid %d) survived SIGKILL", comp, suffix, r.PID)
		}

		By("the launcher gives its silent worker up and the job restarts; the new run waits for the dead node's pod, which Kubernetes keeps")
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "trainjob", name, "-o", `jsonpath={.status.conditions[?(@.type=="Restarted")].status}`)
			return out
		}, 2*time.Minute, time.Second).Should(Equal("True"), func() string { return jobReport(dir, name, nil) })
		out, _ = kubectl(dir, "get", "pods", "-o", "name", "--field-selector", "spec.nodeName="+lost,
			"-l", "jobset.sigs.k8s.io/jobset-name="+name+",jobset.sigs.k8s.io/restart-attempt=0")
		Expect(strings.TrimSpace(out)).NotTo(BeEmpty(), "the dead node's pod was let go before its Node went")
		By("once the pod's grace period has ended, the job says which pod its new run waits for, and how Kubernetes lets it go")
		Eventually(func(g Gomega) {
			out, _ := kubectl(dir, "get", "trainjob", name, "-o", `jsonpath={.status.conditions[?(@.type=="Running")]}`)
			var c metav1.Condition
			g.Expect(json.Unmarshal([]byte(out), &c)).To(Succeed(), out)
			g.Expect(c.Reason).To(Equal(trainjob.ReasonRestarting), "the new run started beside a pod of the old one")
			g.Expect(c.Message).To(ContainSubstring("It waits for the earlier run's pods to go: "))
			g.Expect(c.Message).To(ContainSubstring("node has not confirmed that it stopped by the end of its grace period: if %[1]s is down, "+
				"Kubernetes lets the pod go once the Node is deleted or tainted out of service (kubectl taint node %[1]s node.kubernetes.io/out-of-service=nodeshutdown:NoExecute)", lost))
		}, 2*time.Minute, time.Second).Should(Succeed(), func() string { return jobReport(dir, name, nil) })

		By("the Node goes, as a cloud's node controller deletes the Node of a machine that is gone: the pod garbage collector fails its pods")
		out, code = kubectl(dir, "delete", "node", lost, "--wait=false")
		Expect(code).To(Equal(0), out)

		By("the job restarted on the node left, without spending its budget, and completes")
		out, code = kubectlMPI(dir, "wait", name, "--timeout", "6m")
		if code != 0 {
			Fail(fmt.Sprintf("the job did not complete after its worker's node died (exit %d):\n%s\n%s", code, out, jobReport(dir, name, logs)))
		}
		counted, _ := kubectl(dir, "get", "jobset", name, "-o", "jsonpath={.status.restartsCountTowardsMax}")
		Expect(counted).To(Or(BeEmpty(), Equal("0")), "the node's loss was counted as the program's failure")
		out, _ = kubectl(dir, "get", "pods", "-o", "jsonpath={.items[*].spec.nodeName}", "-l",
			"jobset.sigs.k8s.io/jobset-name="+name+",jobset.sigs.k8s.io/restart-attempt=1")
		Expect(strings.Fields(out)).To(HaveEach(left), "run 1's pods")

		By("describe says why: the launcher lost the worker")
		describe, _ := kubectlMPI(dir, "describe", name)
		Expect(describe).To(ContainSubstring("Restarts: 1, 0 counted against the budget of 0"), describe)
		Expect(describe).To(MatchRegexp(`run 0 stopped \S+ \(not counted\): launcher WorldLost: `), describe)

		By("the second run resumed from the checkpoint, to the model trained straight through")
		expectResumed(dir, name, straight)
	})
}
