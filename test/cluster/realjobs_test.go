package cluster

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// realQueue is a Kueue queue for the real node's jobs: every job of this
// tier is admitted by Kueue as a whole before its pods exist.
const realQueue = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: real}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: real}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: real
      resources:
      - {name: cpu, nominalQuota: "8"}
      - {name: memory, nominalQuota: 16Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: real, namespace: default}
spec: {clusterQueue: real}
`

// piResult is what pi.py and pi.c print on rank 0 when their allreduce is
// right (they exit 1 otherwise).
const piResult = `pi is 3\.14159265\d+ from 4 ranks`

// realNodeJobs are the specs of Torus's jobs on the real node of the
// cluster in *dir, which is up. The jobs of each context are submitted
// together, as on a user's cluster, and each spec checks its own: a job
// spends most of its time waiting (Kueue, the kubelet, back-offs), so
// side by side the tier takes a fraction of the time one after another.
// Every job asks for little CPU, or none: the node has two cores, and a
// rank the scheduler could not place would wait, not fail. (A CPU limit
// slows a job more than sharing the cores does: 17 s for one at 100m
// against 11 s without.)
func realNodeJobs(dirp *string) {
	// runArgs runs a job of 2 workers x 2 ranks through the queue.
	runArgs := func(name, runtime string, command ...string) []string {
		return append([]string{"run", name, "--runtime", runtime, "--workers", "2", "--slots-per-worker", "2",
			"--queue", "real", "--"}, command...)
	}
	// withResources gives a run's pods CPU and memory (requests and
	// limits), which Kueue counts against the queue's quota.
	withResources := func(args []string) []string {
		i := slices.Index(args, "--")
		return slices.Concat(args[:i], []string{"--cpu", "150m", "--memory", "256Mi"}, args[i:])
	}
	// openSSH has a run launch its ranks through the image's OpenSSH (the
	// default runtimes use Torus's launch agent): for the specs of sshd
	// and ssh themselves.
	openSSH := func(args []string) []string {
		return slices.Concat(args[:2], []string{"--launch", "openssh"}, args[2:])
	}
	// withWait makes a run wait for its job to end.
	withWait := func(args []string) []string {
		i := slices.Index(args, "--")
		return slices.Concat(args[:i], []string{"--wait", "--timeout", "3m"}, args[i:])
	}
	// followed starts following every rank's logs of a job just submitted:
	// a worker's pod goes soon after its job completes, and its logs
	// with it.
	followed := func(dir, name string) *background {
		return kubectlMPIInBackground(dir, "logs", name, "-f")
	}
	// completed waits for a job to complete, failing with its report if it
	// did not: job is its run --wait, or when nil, kubectl mpi wait;
	// followed, when set, is the job's logs -f.
	completed := func(dir string, job *background, name string, followed *background) {
		GinkgoHelper()
		if job == nil {
			job = kubectlMPIInBackground(dir, "wait", name, "--timeout", "3m")
		}
		out, code := job.wait()
		if code != 0 {
			Fail(fmt.Sprintf("job %s did not complete (exit %d):\n%s\n%s", name, code, out, jobReport(dir, name, followed)))
		}
	}

	Context("MPI jobs on the real node", Ordered, func() {
		var dir string
		// The commands each spec reads: run --wait, and logs -f.
		jobs := map[string]*background{}
		logs := map[string]*background{}

		BeforeAll(func() {
			dir = *dirp
			applyRealQueue(dir)

			for _, j := range []struct{ name, runtime string }{
				{"ompi4", "torus-openmpi-local"}, {"mpich", "torus-mpich-local"}, {"ompi5", "torus-openmpi5-local"},
			} {
				jobs[j.name] = kubectlMPIInBackground(dir, openSSH(withWait(withResources(runArgs(j.name, j.runtime, piCommand[j.runtime]...))))...)
				// Every rank's output, kept for the report of a failure:
				// the workers' pods go when the job ends.
				logs[j.name] = followed(dir, j.name)
			}
			for _, j := range []struct{ name, base string }{{"uid-ompi4", "torus-openmpi-local"}, {"uid-mpich", "torus-mpich-local"}} {
				rt := assignedUIDRuntime(dir, j.base)
				out, code := kubectlMPI(dir, openSSH(runArgs(j.name, rt, "sh", "-c", "id && exec "+strings.Join(piCommand[j.base], " ")))...)
				Expect(code).To(Equal(0), out)
				logs[j.name] = followed(dir, j.name)
			}
			applyUpstreamDeepSpeed(dir)
			logs["deepspeed"] = followed(dir, "deepspeed")
			// Started before any pod exists: logs -f waits for them, and
			// ends by itself when the launcher does.
			_, code := kubectlMPI(dir, "run", "follow", "--launch", "openssh", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
				"--queue", "real", "--", "mpirun", "-n", "4", "python3", "/opt/torus/pi.py", "200000")
			Expect(code).To(Equal(0))
			logs["follow"] = followed(dir, "follow")
		})

		DescribeTable("runs a job to Complete through Kueue: real sshd on the workers, real mpirun in the launcher, host keys checked",
			func(name string) {
				completed(dir, jobs[name], name, logs[name])
				out, code := kubectlMPI(dir, "logs", name, "--launcher")
				Expect(code).To(Equal(0), out)
				Expect(out).To(MatchRegexp(piResult))
				Expect(out).To(MatchRegexp(`ranks 0,1 on %s-node-0-0`, name))
				Expect(out).To(MatchRegexp(`ranks 2,3 on %s-node-0-1`, name))
				Expect(scheduledNodes(dir, "default", name+"-node-0-")).To(ConsistOf("real-node-0", "real-node-1"), "the workers did not span both nodes")
				// Kueue queues the JobSet, which the TrainJob owns.
				out, _ = kubectl(dir, "get", "workload", "-l", "kueue.x-k8s.io/job-uid="+uid(dir, "jobset", name),
					"-o", `jsonpath={.items[*].status.conditions[?(@.type=="Admitted")].status}`)
				Expect(out).To(Equal("True"), "Kueue did not admit the job's workload")
			},
			Entry("Open MPI 4 (Debian bookworm, mpi4py)", "ompi4"),
			Entry("MPICH 4.2 (Debian trixie, Hydra)", "mpich"),
			Entry("Open MPI 5 (Debian trixie, PRRTE)", "ompi5"),
		)

		It("starts Hydra's proxies only once the launcher's own name resolves: an MPICH job whose launcher is not in DNS yet waits for it, then completes", func() {
			// The proxies mpiexec starts on the workers connect back to it by
			// the launcher's host name, whose DNS record comes from an
			// EndpointSlice the controller manager writes once the launcher's
			// pod has an address: on a busy cluster, after mpiexec has
			// started. Here the controller manager is held (SIGSTOP) from the
			// moment the launcher's pod exists, so the record cannot appear
			// until it resumes.
			const name = "latedns"
			launcher := "jobset.sigs.k8s.io/jobset-name=" + name + ",jobset.sigs.k8s.io/replicatedjob-name=launcher"
			watch := exec.Command(filepath.Join(testbin, "kubectl"), "--kubeconfig", filepath.Join(dir, "kubeconfig"),
				"get", "pods", "-l", launcher, "--watch", "-o", "name")
			stdout, err := watch.StdoutPipe()
			Expect(err).NotTo(HaveOccurred())
			Expect(watch.Start()).To(Succeed())
			DeferCleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
			created := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(stdout).ReadString('\n')
				created <- strings.TrimSpace(line)
			}()
			DeferCleanup(func() { kubectlMPI(dir, "delete", name) })
			out, code := kubectlMPI(dir, runArgs(name, "torus-mpich-local", piCommand["torus-mpich-local"]...)...)
			Expect(code).To(Equal(0), out)
			follow := followed(dir, name)

			var pod string
			Eventually(created, 3*time.Minute).Should(Receive(&pod))
			Expect(pod).To(HavePrefix("pod/"))
			kcm := readPIDs(dir)["kube-controller-manager"].PID
			Expect(syscall.Kill(kcm, syscall.SIGSTOP)).To(Succeed())
			held := true
			resume := func() {
				if held {
					Expect(syscall.Kill(kcm, syscall.SIGCONT)).To(Succeed())
					held = false
				}
			}
			DeferCleanup(resume)
			out, _ = kubectl(dir, "get", "endpointslices", "-l", "kubernetes.io/service-name="+name, "-o", "jsonpath={.items[*].endpoints[*].hostname}")
			Expect(out).NotTo(ContainSubstring(name+"-launcher-0-0"), "the launcher's record was published before the controller manager was held: this spec proves nothing")

			By("the launcher waits in its own container, ahead of mpiexec, for the launcher's own name")
			// The wait says why once it has lasted 5 s; until it ends, the
			// container's process is the wait, which then becomes mpiexec.
			// The bound is the launcher's pod starting (sandbox, the agent's
			// delivery, its container) on a node that runs the other jobs of
			// this context, and then those 5 s.
			Eventually(func() string {
				out, _ := kubectl(dir, "logs", pod, "-c", "node")
				return out
			}, 3*time.Minute, 500*time.Millisecond).Should(ContainSubstring("torus: waiting for " + name + "-launcher-0-0." + name + ": lookup "))
			Consistently(func() string {
				out, _ := kubectl(dir, "exec", pod, "-c", "node", "--", "cat", "/proc/1/cmdline")
				return out
			}, 3*time.Second, 500*time.Millisecond).Should(HavePrefix("/opt/torus-mpi/bin/torus-launch\x00wait\x00"), "mpiexec started before the launcher's name resolved")

			By("once the controller manager resumes, the record appears and the job completes")
			resume()
			completed(dir, nil, name, follow)
			out, code = kubectlMPI(dir, "logs", name, "--launcher")
			Expect(code).To(Equal(0), out)
			Expect(out).To(MatchRegexp(piResult))
		})

		DescribeTable("runs a job as OpenShift's restricted-v2 runs it: a UID from the namespace's range, GID 0, no account in the image",
			func(name string) {
				completed(dir, nil, name, logs[name])
				out, code := logs[name].wait()
				Expect(code).To(Equal(0), out)
				Expect(out).To(MatchRegexp(`\[launcher\] ` + piResult))
				Expect(out).To(ContainSubstring(fmt.Sprintf("[launcher] uid=%d(torus-mpi) gid=0(root)", assignedUID)))
				// sshd let in the account the init container added for the
				// UID, with StrictModes on.
				Expect(out).To(MatchRegexp(`\[worker-0\] Accepted publickey for torus-mpi from`))
			},
			Entry("Open MPI 4", "uid-ompi4"),
			Entry("MPICH 4.2", "uid-mpich"),
		)

		It("runs a job on upstream Trainer's deepspeed-distributed runtime as upstream publishes it, images aside", func() {
			out, code := kubectl(dir, "wait", "trainjob/deepspeed", "--for=condition=Complete", "--timeout=180s")
			if code != 0 {
				Fail(fmt.Sprintf("the job on upstream's runtime did not complete:\n%s\n%s", out, jobReport(dir, "deepspeed", logs["deepspeed"])))
			}
			out, code = logs["deepspeed"].wait()
			Expect(code).To(Equal(0), out)
			Expect(out).To(MatchRegexp(`\[launcher\] pi is 3\.14159265\d+ from 2 ranks`))
			// The worker's sshd ran with the image's configuration and took
			// the job's key; the launcher's ssh checked the host key strictly.
			Expect(out).To(MatchRegexp(`\[worker-0\] Server listening on .* port 2222`))
			Expect(out).To(MatchRegexp(`\[worker-0\] Accepted publickey for mpiuser`))
		})

		It("follows every rank's logs with logs -f until the job ends", func() {
			out, code := logs["follow"].wait()
			Expect(code).To(Equal(0), "logs -f did not end by itself with the job:\n%s", out)
			Expect(out).To(MatchRegexp(`\[launcher\] ` + piResult))
			Expect(out).To(MatchRegexp(`\[worker-1\] Accepted publickey for mpiuser`))
		})
	})

	Context("running, restarted and failing jobs on the real node", Ordered, func() {
		var dir string
		jobs := map[string]*background{}

		BeforeAll(func() {
			dir = *dirp
			// The launcher holds the job open until it is deleted.
			_, code := kubectlMPI(dir, "run", "held", "--launch", "openssh", "--runtime", "torus-openmpi-local",
				"--workers", "2", "--slots-per-worker", "2", "--", "sleep", "600")
			Expect(code).To(Equal(0))
			startRotate(dir)
			startFailures(dir, jobs)
		})

		// The kubelet's and the container runtime's reasons reach the job's
		// conditions, describe and run --wait, named with the rank and the fix.
		Context("explains in the node's own words why a job cannot run", func() {
			It("a launcher that keeps exiting under restartPolicy OnFailure: named with its restarts, then the failure keeps that cause", func() {
				// mpi-operator's launchers restart on failure. (Workers cannot
				// loop: Torus gives them backoffLimit 0, as a replaced worker
				// cannot rejoin an MPI world.) The Job controller deletes the
				// pods once the backoff limit is reached: the cause must
				// outlive them. A kubelet of 1.36 shows the exited container
				// through most of each back-off and CrashLoopBackOff only in
				// its last moment, when it syncs the pod to restart it: either
				// is what the node says.
				DeferCleanup(func() { kubectlMPI(dir, "delete", "crashing") })
				// An exited container's status quotes the end of its output.
				loop := regexp.MustCompile(`launcher (?:CrashLoopBackOff: container node keeps exiting \(restarted (?:once|\d+ times)\)|` +
					`Error: container node exited with code 1 and is restarted by the kubelet \(restarted (?:once|\d+ times)\); it printed: "mpirun: no hostfile"); ` +
					`see kubectl mpi (logs crashing --launcher( --previous)?)`)
				// The logs it points at hold the failed run's output: the
				// exited container's own, or while the kubelet holds it back,
				// the previous one's (the kubelet keeps one exited container).
				// Each try reads the message afresh and follows it at once: a
				// message read late, or followed late, may name a container
				// the kubelet has since replaced with the next run's.
				Eventually(func(g Gomega) {
					msg := running(dir, "crashing").Message
					m := loop.FindStringSubmatch(msg)
					g.Expect(m).NotTo(BeNil(), "the launcher's crash loop is not named: %q", msg)
					logs, _ := kubectlMPI(dir, strings.Fields(m[1])...)
					g.Expect(logs).To(ContainSubstring("mpirun: no hostfile"), "kubectl mpi %s, as %q says", m[1], msg)
				}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())

				out, code := kubectlMPI(dir, "wait", "crashing", "--timeout", "3m")
				Expect(code).To(Equal(3), out)
				// The failed pod itself, or when the Job controller deleted it
				// first, the last problem it reported.
				Expect(out).To(MatchRegexp(`MPI job crashing failed: launcher (CrashLoopBackOff|Error): container node (keeps exiting|exited with code 1)`))
			})

			It("an image the node does not have: ErrImageNeverPull while it waits, then the scheduling timeout fails it with that cause", func() {
				DeferCleanup(func() { kubectlMPI(dir, "delete", "nopull") })
				// Both pods lack the image: the job names the one whose
				// kubelet reported it first.
				neverPull := `(?:launcher|worker-0 \(rank 0\)) ErrImageNeverPull: image ` + regexp.QuoteMeta(fmt.Sprintf("%q", absentImage)) +
					` is not on the node and its pull policy is Never`
				// The kubelet reaches the image only once the pod's sandbox
				// is up, which on a busy machine can take it several tries:
				// Multus gives its read of the pod 250 ms, and the kubelet
				// retries a failed sandbox about every 10 s. So the job runs
				// with a scheduling timeout it cannot reach first, the spec
				// waits for the node's reason, and then lowers the timeout
				// below the time already waited, which fails the job at once.
				Eventually(func() string { return running(dir, "nopull").Message }, 5*time.Minute, time.Second).Should(MatchRegexp(neverPull),
					func() string { return "the missing image was not named:\n" + jobReport(dir, "nopull", nil) })
				out, code := kubectl(dir, "annotate", "trainjob", "nopull", "--overwrite", api.AnnotationSchedulingTimeout+"=1s")
				Expect(code).To(Equal(0), out)

				out, code = jobs["nopull"].wait()
				Expect(code).To(Equal(3), "run --wait exits 3 when the job fails:\n%s", out)
				Expect(out).To(ContainSubstring("Not all ranks ran within the scheduling timeout of 1s"))
				Expect(out).To(MatchRegexp("it waited for: " + neverPull))
				describe, _ := kubectlMPI(dir, "describe", "nopull")
				Expect(describe).To(MatchRegexp(`Reason:\s+Not all ranks ran within the scheduling timeout of 1s`))
				Expect(describe).To(ContainSubstring(fmt.Sprintf(`image %q is not on the node`, absentImage)))
				// The timeout released the job's pods.
				Eventually(func() string {
					out, _ := kubectl(dir, "get", "pods", "-l", "torus-mpi.io/job-name=nopull", "-o", "name")
					return out
				}, time.Minute, time.Second).Should(BeEmpty())
			})

			It("an image without a shell: the SSH setup cannot start, the job fails with the runtime's words and what the image needs", func() {
				DeferCleanup(func() { kubectlMPI(dir, "delete", "noshell") })
				out, code := jobs["noshell"].wait()
				Expect(code).To(Equal(3), "run --wait exits 3 when the job fails:\n%s", out)
				Expect(out).To(ContainSubstring(`StartError: container mpi-ssh-setup could not start: exec: "/bin/sh": stat /bin/sh: no such file or directory;`))
				Expect(out).To(ContainSubstring("the image needs sh, mkdir, chmod, cp, id, cat, tail, sleep"))
				describe, _ := kubectlMPI(dir, "describe", "noshell")
				Expect(describe).To(MatchRegexp(`Reason:\s+StartError: container mpi-ssh-setup could not start`))
			})

			It("a launcher that cannot reach a worker's sshd: the job fails with ssh's own words, the cause and the fix", func() {
				DeferCleanup(func() { kubectlMPI(dir, "delete", "unreachable") })
				out, code := jobs["unreachable"].wait()
				Expect(code).To(Equal(3), "run --wait exits 3 when the job fails:\n%s", out)
				refused := `ssh: connect to host unreachable-node-0-0.unreachable port 2222: Connection refused`
				Expect(out).To(ContainSubstring("launcher SSHConnectionRefused: container node exited with code"))
				Expect(out).To(ContainSubstring("ssh to unreachable-node-0-0.unreachable port 2222 was refused: no sshd listens there"))
				Expect(out).To(ContainSubstring(`it printed: "` + refused + `"`))
				Expect(out).To(ContainSubstring("the workers must run sshd -De -f /home/mpiuser/.ssh/sshd_config"))
				describe, _ := kubectlMPI(dir, "describe", "unreachable")
				Expect(describe).To(MatchRegexp(`Reason:\s+SSHConnectionRefused: container node exited with code \d+: ssh to unreachable-node-0-0.unreachable port 2222 was refused`))
				Expect(describe).To(MatchRegexp(`Last output:\s+"` + regexp.QuoteMeta(refused) + `"`))
				Expect(describe).To(MatchRegexp(`Fix:\s+the workers must run sshd`))
			})

			It("a rank that raises while the other waits in a barrier: probably stuck with the rank's exception, then failed by its stall timeout, its pods released", func() {
				// mpi4py finalizes MPI as the raising rank exits, which waits
				// for the rank in the barrier: neither ends, and mpirun never
				// notices. Only the launcher's output tells.
				DeferCleanup(func() { kubectlMPI(dir, "delete", "hang") })
				const program = `from mpi4py import MPI
c = MPI.COMM_WORLD
print(f"rank {c.rank} ready", flush=True)
if c.rank == 1:
    raise RuntimeError("rank 1 gives up")
c.Barrier()`
				hang := kubectlMPIInBackground(dir, "run", "hang", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "1",
					"--cpu", "100m", "--memory", "256Mi", "--stall-timeout", "1m", "--wait", "--timeout", "5m",
					"--", "mpirun", "-n", "2", "python3", "-c", program)
				// The Stalled condition lasts until the stall timeout; its
				// event stays.
				Eventually(func() string {
					out, _ := kubectl(dir, "get", "events", "--field-selector", "involvedObject.kind=TrainJob,involvedObject.name=hang,reason=QuietAfterFailure",
						"-o", "jsonpath={.items[*].message}")
					return out
				}, 3*time.Minute, time.Second).Should(And(
					ContainSubstring("Probably stuck: a rank raised RuntimeError: rank 1 gives up, and the launcher has printed nothing since"),
					ContainSubstring(`line 5, in <module>" "RuntimeError: rank 1 gives up"`),
					ContainSubstring("python -m mpi4py")), func() string { return "the hang was not seen:\n" + jobReport(dir, "hang", nil) })

				out, code := hang.wait()
				Expect(code).To(Equal(3), "run --wait exits 3 when the job fails:\n%s", out)
				Expect(out).To(ContainSubstring("The launcher printed nothing for the stall timeout of 1m0s"))
				Expect(out).To(ContainSubstring("after PythonException a rank raised RuntimeError: rank 1 gives up"))
				describe, _ := kubectlMPI(dir, "describe", "hang")
				Expect(describe).To(MatchRegexp(`State:\s+Failed`))
				Expect(describe).To(MatchRegexp(`Reason:\s+The launcher printed nothing for the stall timeout of 1m0s`))
				// The stop released the job's pods.
				Eventually(func() string {
					out, _ := kubectl(dir, "get", "pods", "-l", "torus-mpi.io/job-name=hang", "-o", "name")
					return out
				}, 2*time.Minute, time.Second).Should(BeEmpty())
			})

			It("a container whose ConfigMap is missing: CreateContainerConfigError in the kubelet's words", func() {
				DeferCleanup(func() { kubectlMPI(dir, "delete", "noconfig") })
				Eventually(func() string { return running(dir, "noconfig").Message }, 2*time.Minute, time.Second).Should(
					MatchRegexp(`CreateContainerConfigError: configmap "torus-not-there" not found; check the Secrets, ConfigMaps and volumes the pod refers to`))
				describe, _ := kubectlMPI(dir, "describe", "noconfig")
				Expect(describe).To(MatchRegexp(`Problem:\s+.*CreateContainerConfigError: configmap "torus-not-there" not found`))
			})
		})

		It("reaches a running job's ranks through the kubelet: exec-rank with exit codes, top, strict host keys", func() {
			// Not waited for: sleep, PID 1 of its container, ignores
			// SIGTERM, so its pods take the 30 s grace period to go.
			DeferCleanup(func() { kubectlMPI(dir, "delete", "held") })
			Eventually(func() string { return running(dir, "held").Status }, 2*time.Minute, time.Second).Should(Equal("True"))
			By("rank 3 lives on worker-1: its own host name, answered from its container")
			out, code := kubectlMPI(dir, "exec-rank", "held", "3", "-q", "--", "hostname")
			Expect(code).To(Equal(0))
			Expect(strings.TrimSpace(out)).To(Equal("held-node-0-1"))
			By("the command's exit code passes through")
			_, code = kubectlMPI(dir, "exec-rank", "held", "0", "-q", "--", "sh", "-c", "exit 3")
			Expect(code).To(Equal(3))
			By("every worker at once")
			out, code = kubectlMPI(dir, "exec-rank", "held", "--all", "--", "hostname")
			Expect(code).To(Equal(0))
			Expect(out).To(ContainSubstring("[worker-0] held-node-0-0"))
			Expect(out).To(ContainSubstring("[worker-1] held-node-0-1"))

			By("the launcher's ssh checks host keys: its effective configuration for a worker")
			launcher, code := kubectl(dir, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=held,jobset.sigs.k8s.io/replicatedjob-name=launcher", "-o", "name")
			Expect(code).To(Equal(0))
			out, code = kubectl(dir, "exec", strings.TrimSpace(launcher), "-c", "node", "--", "ssh", "-G", "held-node-0-1.held")
			Expect(code).To(Equal(0), out)
			Expect(out).To(ContainSubstring("stricthostkeychecking true"))
			By("and reaches the worker with it, for real")
			out, code = kubectl(dir, "exec", strings.TrimSpace(launcher), "-c", "node", "--", "ssh", "held-node-0-1.held", "hostname")
			Expect(code).To(Equal(0), out)
			Expect(strings.TrimSpace(out)).To(Equal("held-node-0-1"))

			By("top: real CPU and memory from the node's kubelet, worker-1 as busy as the loop it runs")
			// A loop that keeps a core busy for two minutes in worker-1's
			// container, detached from the exec. The kubelet serves the
			// pod's own CPU counter unchanged for seconds between cAdvisor's
			// updates: a rate between two reads of it a second apart shows
			// no use at all.
			out, code = kubectlMPI(dir, "exec-rank", "held", "3", "-q", "--", "sh", "-c", "timeout 120 sh -c 'while :; do :; done' >/dev/null 2>&1 &")
			Expect(code).To(Equal(0), out)
			// The kubelet's resource metrics name a container only once its
			// stats provider has sampled it, some seconds after it started
			// (later on a busy node): top shows <pending> until then.
			cpu := regexp.MustCompile(`(?m)^\s*worker-1\s+\S+\s+\S+\s+\S+\s+(\d+)m\s+\S+\s+\d+Mi\s`)
			Eventually(func(g Gomega) {
				out, code := kubectlMPI(dir, "top", "held")
				g.Expect(code).To(Equal(0), out)
				g.Expect(out).To(MatchRegexp(`(?m)^\s*launcher\s.*\d+Mi`))
				m := cpu.FindStringSubmatch(out)
				g.Expect(m).NotTo(BeNil(), "worker-1's CPU and memory:\n%s", out)
				g.Expect(strconv.Atoi(m[1])).To(BeNumerically(">=", 100), "worker-1's CPU, a busy loop's:\n%s", out)
			}, time.Minute, 2*time.Second).Should(Succeed())

			By("sshd's own words in the workers' logs, not repeated by probes")
			out, code = kubectlMPI(dir, "logs", "held", "--worker", "0")
			Expect(code).To(Equal(0))
			Expect(out).To(MatchRegexp(`Server listening on .* port 2222`))
			// The kubelet's startup probe connects from the node until sshd
			// first answers; every other connection (the launcher's host
			// key scans, however many a busy node takes, and mpirun's)
			// comes from a pod of the job.
			ips, code := kubectl(dir, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=held", "-o", "jsonpath={.items[*].status.podIP}")
			Expect(code).To(Equal(0), ips)
			fromNode := 0
			for _, m := range regexp.MustCompile(`Connection closed by (\S+) port \d+`).FindAllStringSubmatch(out, -1) {
				if !slices.Contains(strings.Fields(ips), m[1]) {
					fromNode++
				}
			}
			Expect(fromNode).To(BeNumerically("<=", 1), "sshd logs a connection per probe (the job's pods are %s):\n%s", ips, out)
		})

		It("rotates the keys when the JobSet restarts, and a run whose pods mounted different Secrets still connects", func() {
			// The race: a JobSet restart creates the new run's pods at once,
			// while Torus replaces the Secret only once it sees the restart.
			// Here it is forced: a finalizer keeps the old Secret across the
			// restart, so the new workers mount it, and the launcher, held
			// back until the workers are Ready, mounts the new one.
			DeferCleanup(func() { kubectlMPI(dir, "delete", "rotate") })
			Eventually(func() string { return running(dir, "rotate").Status }, 2*time.Minute, time.Second).Should(Equal("True"))
			By("the old Secret held by a finalizer across the restart: the new workers mount it")
			hold := func(finalizers string) {
				out, code := kubectl(dir, "patch", "secret", "rotate-mpi-ssh", "--type", "merge", "-p", `{"metadata":{"finalizers":`+finalizers+`}}`)
				Expect(code).To(Equal(0), out)
			}
			hold(`["torus-mpi.io/test-hold"]`)
			DeferCleanup(func() {
				kubectl(dir, "patch", "secret", "rotate-mpi-ssh", "--type", "merge", "-p", `{"metadata":{"finalizers":null}}`)
			})
			nextKeys := secretKey(dir, "rotate-mpi-ssh", "next-authorized_keys")
			launcher, _ := kubectl(dir, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=rotate,jobset.sigs.k8s.io/replicatedjob-name=launcher", "-o", "name")
			out, code := kubectl(dir, "exec", strings.TrimSpace(launcher), "-c", "node", "--", "touch", "/tmp/fail")
			// The launcher's command ends as soon as it sees the file, and
			// its container's end kills what still runs in it: touch may
			// be killed (137) after making the file, before it exits. The
			// run fails as asked either way, which the restarted run's
			// workers below show.
			Expect(code).To(Or(Equal(0), Equal(137)), out)
			workers := "jobset.sigs.k8s.io/jobset-name=rotate,jobset.sigs.k8s.io/replicatedjob-name=node,jobset.sigs.k8s.io/restart-attempt=1"
			var names []string
			Eventually(func() []string {
				out, _ := kubectl(dir, "get", "pods", "-l", workers, "--field-selector", "status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}")
				names = strings.Fields(out)
				return names
			}, 2*time.Minute, time.Second).Should(HaveLen(2))
			for _, w := range names {
				mounted, code := kubectl(dir, "exec", w, "-c", "node", "--", "cat", "/home/mpiuser/.ssh/authorized_keys")
				Expect(code).To(Equal(0), mounted)
				Expect(mounted).To(Equal(nextKeys), "worker %s of the restarted run did not take the old Secret's keys for its run", w)
			}

			By("the old Secret let go: Torus replaces it with the run's own, whose current keys are those")
			hold("null")
			Eventually(func() string {
				out, _ := kubectl(dir, "get", "secret", "rotate-mpi-ssh", "-o", "jsonpath={.data.run}")
				return out
			}, time.Minute, time.Second).Should(Equal(base64.StdEncoding.EncodeToString([]byte("1"))))
			Expect(secretKey(dir, "rotate-mpi-ssh", "authorized_keys")).To(Equal(nextKeys))

			By("the workers Ready: the launcher starts on the new Secret and reaches them")
			for _, w := range names {
				out, code := kubectl(dir, "exec", w, "-c", "node", "--", "touch", "/tmp/ready")
				Expect(code).To(Equal(0), out)
			}
			out, code = kubectlMPI(dir, "wait", "rotate", "--timeout", "3m")
			if code != 0 {
				describe, _ := kubectlMPI(dir, "describe", "rotate")
				logs, _ := kubectlMPI(dir, "logs", "rotate", "--launcher")
				Fail(fmt.Sprintf("the restarted job did not complete (exit %d):\n%s\n%s\n%s", code, out, describe, logs))
			}
			out, _ = kubectl(dir, "get", "jobset", "rotate", "-o", "jsonpath={.status.restarts}")
			Expect(out).To(Equal("1"), "the JobSet did not restart")
			logs, _ := kubectlMPI(dir, "logs", "rotate", "--launcher")
			Expect(logs).To(MatchRegexp(`pi is 3\.14159\d+ from 4 ranks`))
		})
	})

	Context("Torus's launch agent in place of OpenSSH, on images without it", Ordered, func() {
		var dir string
		logs := map[string]*background{}
		// noSSH runs a job's command only where no OpenSSH program exists.
		noSSH := func(command []string) []string {
			return []string{"sh", "-c", "if command -v ssh || command -v sshd; then echo OpenSSH is in the image; exit 1; fi; id; exec " + strings.Join(command, " ")}
		}

		BeforeAll(func() {
			dir = *dirp
			applyRealQueue(dir)
			for _, j := range []struct{ name, runtime, image string }{
				{"agent-ompi4", "torus-openmpi-local", mpiImageNoSSH},
				{"agent-mpich", "torus-mpich-local", mpiTrixieImageNoSSH},
				{"agent-ompi5", "torus-openmpi5-local", mpiTrixieImageNoSSH},
			} {
				// Created before its logs are followed, which need the job.
				args := withResources(runArgs(j.name, j.runtime, noSSH(piCommand[j.runtime])...))
				out, code := kubectlMPI(dir, slices.Concat(args[:2], []string{"--launch", "agent", "--image", j.image}, args[2:])...)
				Expect(code).To(Equal(0), out)
				logs[j.name] = followed(dir, j.name)
			}
			rt := assignedUIDRuntime(dir, "torus-openmpi-local")
			args := runArgs("agent-uid", rt, noSSH(piCommand["torus-openmpi-local"])...)
			out, code := kubectlMPI(dir, slices.Concat(args[:2], []string{"--launch", "agent", "--image", mpiImageNoSSH}, args[2:])...)
			Expect(code).To(Equal(0), out)
			logs["agent-uid"] = followed(dir, "agent-uid")
			// The runtime's own image holds the agent: the job sets none.
			out, code = kubectlMPI(dir, withResources(runArgs("agent-image", agentInImageRuntime(dir), noSSH(piCommand["torus-openmpi-local"])...))...)
			Expect(code).To(Equal(0), out)
			logs["agent-image"] = followed(dir, "agent-image")
			// Torus's image mounted as an image volume brings the agent.
			rt = agentRuntime(dir, "agent-image-volume", map[string]string{api.AnnotationLaunchAgentDelivery: api.LaunchAgentByImageVolume})
			out, code = kubectlMPI(dir, withResources(runArgs("agent-volume", rt, noSSH(piCommand["torus-openmpi-local"])...))...)
			Expect(code).To(Equal(0), out)
			logs["agent-volume"] = followed(dir, "agent-volume")
			// An init container brings it, though the nodes mount image
			// volumes.
			rt = agentRuntime(dir, "agent-init-container", map[string]string{api.AnnotationLaunchAgentDelivery: api.LaunchAgentByInitContainer})
			out, code = kubectlMPI(dir, withResources(runArgs("agent-init", rt, noSSH(piCommand["torus-openmpi-local"])...))...)
			Expect(code).To(Equal(0), out)
			logs["agent-init"] = followed(dir, "agent-init")
		})

		DescribeTable("runs a job to Complete with no OpenSSH in its image: the agent on the workers, its client in mpirun's place, keys checked both ways",
			func(name string) {
				completed(dir, nil, name, logs[name])
				out, code := logs[name].wait()
				Expect(code).To(Equal(0), out)
				Expect(out).NotTo(ContainSubstring("OpenSSH is in the image"))
				Expect(out).To(MatchRegexp(`\[launcher\] ` + piResult))
				Expect(out).To(MatchRegexp(`\[launcher\] ranks 0,1 on %s-node-0-0`, name))
				Expect(out).To(MatchRegexp(`\[launcher\] ranks 2,3 on %s-node-0-1`, name))
				Expect(out).To(MatchRegexp(`\[worker-0\] torus-launch agent: listening on \[::\]:2222`))
				Expect(scheduledNodes(dir, "default", name+"-node-0-")).To(ConsistOf("real-node-0", "real-node-1"), "the workers did not span both nodes")
			},
			Entry("Open MPI 4 (Debian bookworm without OpenSSH)", "agent-ompi4"),
			Entry("MPICH 4.2 (Debian trixie without OpenSSH, Hydra)", "agent-mpich"),
			Entry("Open MPI 5 (Debian trixie without OpenSSH, PRRTE)", "agent-ompi5"),
		)

		// withoutInitContainer checks that a job completed with pods that had
		// no init container, each container starting with binary.
		withoutInitContainer := func(name, binary string) {
			GinkgoHelper()
			completed(dir, nil, name, logs[name])
			out, code := logs[name].wait()
			Expect(code).To(Equal(0), out)
			Expect(out).NotTo(ContainSubstring("OpenSSH is in the image"))
			Expect(out).To(MatchRegexp(`\[launcher\] ` + piResult))
			Expect(out).To(MatchRegexp(`\[worker-0\] torus-launch agent: listening on \[::\]:2222`))
			out, code = kubectl(dir, "get", "jobset", name, "-o", "jsonpath={.spec.replicatedJobs[*].template.spec.template.spec.initContainers[*].name}")
			Expect(code).To(Equal(0), out)
			Expect(out).To(BeEmpty(), "the job's pods have init containers")
			out, code = kubectl(dir, "get", "jobset", name, "-o", "jsonpath={.spec.replicatedJobs[*].template.spec.template.spec.containers[0].command[0]}")
			Expect(code).To(Equal(0), out)
			Expect(strings.Fields(out)).To(HaveLen(2))
			Expect(strings.Fields(out)).To(HaveEach(binary))
		}

		It("runs the agent from the job's image where its runtime says the image holds it: no pod has an init container", func() {
			withoutInitContainer("agent-image", agentInImagePath)
		})

		It("runs the agent from Torus's image mounted as an image volume by default, the nodes mounting one: no pod has an init container", func() {
			withoutInitContainer("agent-ompi4", mpi.LaunchImageVolumeBinary)
		})

		It("brings the agent by init container where its runtime asks, though the nodes mount image volumes", func() {
			completed(dir, nil, "agent-init", logs["agent-init"])
			out, code := logs["agent-init"].wait()
			Expect(code).To(Equal(0), out)
			Expect(out).To(MatchRegexp(`\[launcher\] ` + piResult))
			out, code = kubectl(dir, "get", "jobset", "agent-init", "-o", "jsonpath={.spec.replicatedJobs[*].template.spec.template.spec.initContainers[*].name}")
			Expect(code).To(Equal(0), out)
			Expect(strings.Fields(out)).To(ContainElement(mpi.SSHInitContainer))
			out, code = kubectl(dir, "get", "jobset", "agent-init", "-o", "jsonpath={.spec.replicatedJobs[*].template.spec.template.spec.volumes[*].name}")
			Expect(code).To(Equal(0), out)
			Expect(strings.Fields(out)).NotTo(ContainElement(mpi.LaunchImageVolume))
		})

		It("runs the agent from Torus's image mounted as an image volume where its runtime asks: no pod has an init container", func() {
			withoutInitContainer("agent-volume", mpi.LaunchImageVolumeBinary)
			By("the volume is Torus's image, the one the init container of a job that asks for it comes from")
			out, code := kubectl(dir, "get", "jobset", "agent-volume", "-o", "jsonpath={.spec.replicatedJobs[*].template.spec.template.spec.volumes[?(@.name==\""+mpi.LaunchImageVolume+"\")].image.reference}")
			Expect(code).To(Equal(0), out)
			init, code := kubectl(dir, "get", "jobset", "agent-init", "-o", "jsonpath={.spec.replicatedJobs[0].template.spec.template.spec.initContainers[0].image}")
			Expect(code).To(Equal(0), init)
			Expect(init).NotTo(BeEmpty())
			Expect(strings.Fields(out)).To(Equal([]string{init, init}))

			By("kubectl mpi doctor names the nodes that do not mount image volumes: kwok's, not the real ones")
			out, _ = kubectlMPI(dir, "doctor", "-n", "default", "-o", "json")
			var results []struct{ Check, Status, Message string }
			Expect(json.Unmarshal([]byte(out), &results)).To(Succeed(), out)
			i := slices.IndexFunc(results, func(r struct{ Check, Status, Message string }) bool { return r.Check == "Image volumes" })
			Expect(i).NotTo(BeNumerically("<", 0), out)
			Expect(results[i].Message).To(ContainSubstring("TrainingRuntime agent-image-volume"))
			Expect(results[i].Message).NotTo(ContainSubstring("real-node"), "a real node, on containerd 2.2, is said not to mount image volumes")
			nodes, code := kubectl(dir, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}")
			Expect(code).To(Equal(0), nodes)
			for _, n := range strings.Fields(nodes) {
				if !strings.HasPrefix(n, "real-node") {
					Expect(results[i].Message).To(ContainSubstring(n), "kwok's node %s is not named", n)
				}
			}
			Expect(results[i].Message).To(ContainSubstring("(kubelet kwok-"))
		})

		It("runs a job under a UID the image has no account for, as restricted-v2 assigns one: the agent needs none", func() {
			completed(dir, nil, "agent-uid", logs["agent-uid"])
			out, code := logs["agent-uid"].wait()
			Expect(code).To(Equal(0), out)
			Expect(out).To(MatchRegexp(`\[launcher\] ` + piResult))
			Expect(out).To(ContainSubstring(fmt.Sprintf("[launcher] uid=%d gid=0(root)", assignedUID)))
		})
	})
}

// applyRealQueue applies the real nodes' Kueue queue, "real"; a context
// whose specs may run alone applies it itself.
func applyRealQueue(dir string) {
	GinkgoHelper()
	queue := filepath.Join(dir, "queue.yaml")
	Expect(os.WriteFile(queue, []byte(realQueue), 0o644)).To(Succeed())
	out, code := kubectl(dir, "apply", "-f", queue)
	Expect(code).To(Equal(0), out)
}

// The local cluster's MPI images with every OpenSSH package purged
// (test/localcluster/images/mpi/build.sh SUITE-nossh); the first also holds
// torus-launch at agentInImagePath.
const (
	mpiImageNoSSH       = "registry.torus.local/mpi-nossh:1"
	mpiTrixieImageNoSSH = "registry.torus.local/mpi-trixie-nossh:1"
	agentInImagePath    = "/usr/local/bin/torus-launch"
)

// agentInImageRuntime applies the TrainingRuntime agent-in-image:
// agentRuntime annotated with where mpiImageNoSSH holds the agent.
func agentInImageRuntime(dir string) string {
	GinkgoHelper()
	return agentRuntime(dir, "agent-in-image", map[string]string{api.AnnotationLaunchAgentPath: agentInImagePath})
}

// agentRuntime applies the TrainingRuntime name: the local Open MPI
// runtime on mpiImageNoSSH, with the launch agent and the annotations
// more, and returns its name for run --runtime.
func agentRuntime(dir, name string, more map[string]string) string {
	GinkgoHelper()
	rt := localRuntime(dir, "torus-openmpi-local")
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		ps := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for j := range ps.Containers {
			ps.Containers[j].Image = mpiImageNoSSH
		}
	}
	annotations := map[string]string{}
	for k, v := range rt.Annotations {
		if strings.HasPrefix(k, api.Domain) {
			annotations[k] = v
		}
	}
	annotations[api.AnnotationRemoteLaunch] = api.RemoteLaunchAgent
	maps.Copy(annotations, more)
	apply(dir, &trainer.TrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: rt.Labels, Annotations: annotations},
		Spec:       rt.Spec,
	})
	return "TrainingRuntime/" + name
}

// noSSHImage is, for each local runtime, its image without OpenSSH.
var noSSHImage = map[string]string{
	"torus-openmpi-local":  mpiImageNoSSH,
	"torus-mpich-local":    mpiTrixieImageNoSSH,
	"torus-openmpi5-local": mpiTrixieImageNoSSH,
}

// piCommand computes pi on 4 ranks with each local runtime's MPI.
var piCommand = map[string][]string{
	"torus-openmpi-local":  {"mpirun", "-n", "4", "python3", "/opt/torus/pi.py", "200000"},
	"torus-mpich-local":    {"mpiexec.mpich", "-n", "4", "/opt/torus/pi-mpich", "200000"},
	"torus-openmpi5-local": {"mpirun", "-n", "4", "/opt/torus/pi-openmpi5", "200000"},
}

// assignedUID is what restricted-v2's admission would give the pods of a
// namespace whose range is 1000680000/10000: a UID the image does not know.
const assignedUID = 1000680000

// assignedUIDRuntime applies a copy of a local runtime with what
// restricted-v2's admission adds to every pod, a UID and an fsGroup from
// the namespace's range, and returns its name.
func assignedUIDRuntime(dir, base string) string {
	GinkgoHelper()
	rt := localRuntime(dir, base)
	rt.ObjectMeta = metav1.ObjectMeta{Name: base + "-assigned-uid"}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		ps := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		if ps.SecurityContext == nil {
			ps.SecurityContext = &corev1.PodSecurityContext{}
		}
		ps.SecurityContext.FSGroup = ptr.To[int64](assignedUID)
		for j := range ps.Containers {
			if ps.Containers[j].SecurityContext == nil {
				ps.Containers[j].SecurityContext = &corev1.SecurityContext{}
			}
			ps.Containers[j].SecurityContext.RunAsUser = ptr.To[int64](assignedUID)
		}
	}
	apply(dir, rt)
	return rt.Name
}

// applyUpstreamDeepSpeed applies upstream's deepspeed-distributed runtime
// from the pinned Trainer module, with the local image, and a TrainJob of
// a launcher and one worker on it. Its workers start sshd with the
// configuration the image carries (mpi-operator's base, "HostKey <ssh
// dir>/id_rsa"), and Torus serves the job's keys under the names that
// configuration expects.
func applyUpstreamDeepSpeed(dir string) {
	GinkgoHelper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubeflow/trainer/v2").Output()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "manifests", "base", "runtimes", "deepspeed_distributed.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var rt trainer.ClusterTrainingRuntime
	Expect(yaml.Unmarshal(data, &rt)).To(Succeed())
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		ps := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for j := range ps.Containers {
			ps.Containers[j].Image = "registry.torus.local/mpi:1"
			ps.Containers[j].ImagePullPolicy = corev1.PullNever
		}
	}
	tj := trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: "deepspeed", Namespace: "default", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "real"}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: rt.Name},
			Trainer: &trainer.Trainer{
				// runLauncherAsNode: the launcher and one worker.
				NumNodes: ptr.To[int32](2),
				Command:  []string{"mpirun", "-n", "2", "python3", "/opt/torus/pi.py", "200000"},
				ResourcesPerNode: &corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
				}},
			},
		},
	}
	apply(dir, &rt)
	apply(dir, &tj)
}

// startRotate submits a job on a runtime whose JobSet restarts once: the
// first run computes, then fails when the test touches /tmp/fail in the
// launcher; the second run's workers are Ready only once it touches
// /tmp/ready in them.
func startRotate(dir string) {
	GinkgoHelper()
	rt := localRuntime(dir, "torus-openmpi-local")
	js := &rt.Spec.Template.Spec
	js.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 1}
	attempt := corev1.EnvVar{Name: "RESTART_ATTEMPT", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}}}
	for i := range js.ReplicatedJobs {
		c := &js.ReplicatedJobs[i].Template.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, attempt)
		if js.ReplicatedJobs[i].Name == "node" {
			c.StartupProbe = &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c",
					`test "$RESTART_ATTEMPT" = 0 || test -e /tmp/ready`}}},
				PeriodSeconds: 1, FailureThreshold: 600,
			}
		}
	}
	apply(dir, &trainer.TrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: "restart-once", Namespace: "default", Labels: rt.Labels},
		Spec:       rt.Spec,
	})
	_, code := kubectlMPI(dir, "run", "rotate", "--runtime", "TrainingRuntime/restart-once", "--workers", "2", "--slots-per-worker", "2",
		"--", "sh", "-c", `mpirun -n 4 python3 /opt/torus/pi.py 20000 && if [ "$RESTART_ATTEMPT" = 0 ]; then until [ -e /tmp/fail ]; do sleep 0.2; done; exit 1; fi`)
	Expect(code).To(Equal(0))
}

// absentImage is an image the node does not have.
const absentImage = "registry.torus.local/not-built:1"

// startFailures submits the jobs that cannot run, each for another reason
// the node gives; those run with --wait are recorded in jobs.
func startFailures(dir string, jobs map[string]*background) {
	GinkgoHelper()
	// A launcher that restarts on failure, as mpi-operator's do, with
	// back-offs of 10 and 20 s after the second and third exits: time to
	// read the previous run's logs.
	localVariant(dir, "launcher-on-failure", func(role string, ps *corev1.PodSpec, spec *batchv1.JobSpec) {
		if role == "launcher" {
			ps.RestartPolicy = corev1.RestartPolicyOnFailure
			spec.BackoffLimit = ptr.To[int32](3)
		}
	})
	_, code := kubectlMPI(dir, "run", "crashing", "--runtime", "TrainingRuntime/launcher-on-failure", "--workers", "1",
		"--cpu", "100m", "--memory", "128Mi", "--", "sh", "-c", "echo 'mpirun: no hostfile' >&2; exit 1")
	Expect(code).To(Equal(0))

	jobs["nopull"] = kubectlMPIInBackground(dir, "run", "nopull", "--runtime", "torus-openmpi-local", "--image", absentImage,
		"--workers", "1", "--cpu", "100m", "--memory", "128Mi", "--scheduling-timeout", "1h", "--wait", "--timeout", "15m", "--", "true")

	// The node's pause image has one static binary and no sh, and no
	// user: the pods get one.
	localVariant(dir, "as-65532", func(_ string, ps *corev1.PodSpec, _ *batchv1.JobSpec) {
		ps.SecurityContext.RunAsUser = ptr.To[int64](65532)
	})
	jobs["noshell"] = kubectlMPIInBackground(dir, "run", "noshell", "--launch", "openssh", "--runtime", "TrainingRuntime/as-65532", "--image", "registry.torus.local/pause:1",
		"--workers", "1", "--cpu", "100m", "--memory", "128Mi", "--wait", "--timeout", "3m", "--", "true")

	// Workers whose sshd listens on another port than the job's, where
	// their startup probe looks: Ready, and unreachable for the launcher.
	// (A Port option would add a port; a ListenAddress with a port
	// replaces them.)
	localVariant(dir, "sshd-elsewhere", func(role string, ps *corev1.PodSpec, _ *batchv1.JobSpec) {
		if role == "node" {
			ps.Containers[0].Args = append(ps.Containers[0].Args, "-o", "ListenAddress=0.0.0.0:2223")
			ps.Containers[0].StartupProbe.TCPSocket.Port = intstr.FromInt32(2223)
		}
	})
	jobs["unreachable"] = kubectlMPIInBackground(dir, "run", "unreachable", "--launch", "openssh", "--runtime", "TrainingRuntime/sshd-elsewhere",
		"--workers", "1", "--cpu", "100m", "--memory", "128Mi", "--wait", "--timeout", "3m", "--", "mpirun", "-n", "1", "hostname")

	manifest := `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: noconfig, namespace: default}
spec:
  runtimeRef: {name: torus-openmpi-local}
  trainer:
    numNodes: 1
    command: ["true"]
    resourcesPerNode: {limits: {cpu: 100m, memory: 128Mi}}
    env:
    - name: SETTING
      valueFrom: {configMapKeyRef: {name: torus-not-there, key: setting}}
`
	file := filepath.Join(dir, "noconfig.yaml")
	Expect(os.WriteFile(file, []byte(manifest), 0o644)).To(Succeed())
	out, code := kubectlMPI(dir, "run", "-f", file)
	Expect(code).To(Equal(0), out)
}

// jobReport is what a failed job's spec reports: its description (the
// failing rank, its cause and the end of its own output), the last lines of
// each of its pods' containers still on the node, and everything its ranks
// printed while followed (logs -f) when it was, as the workers' pods go
// with the job.
func jobReport(dir, name string, followed *background) string {
	GinkgoHelper()
	return jobReportIn(dir, "default", name, followed)
}

// jobReportIn is jobReport for a job of namespace ns.
func jobReportIn(dir, ns, name string, followed *background) string {
	GinkgoHelper()
	var b strings.Builder
	describe, _ := kubectlMPI(dir, "describe", name, "-n", ns)
	fmt.Fprintf(&b, "--- kubectl mpi describe %s -n %s\n%s\n", name, ns, describe)
	pods, _ := kubectl(dir, "get", "pods", "-n", ns, "-l", "jobset.sigs.k8s.io/jobset-name="+name, "-o", "name")
	for _, pod := range strings.Fields(pods) {
		out, _ := kubectl(dir, "logs", "-n", ns, pod, "--all-containers", "--prefix", "--tail", "30")
		fmt.Fprintf(&b, "--- the last lines of %s\n%s\n", pod, out)
	}
	// A component that has died (the operator, a kubelet) says why in its
	// own last lines, which test/localcluster status prints.
	if out, code := clusterCmd(dir, "status"); code != 0 {
		fmt.Fprintf(&b, "--- the cluster's components\n%s\n", out)
	}
	if followed != nil {
		select {
		case <-followed.done:
			fmt.Fprintf(&b, "--- kubectl mpi logs %s -f\n%s\n", name, followed.out)
		case <-time.After(30 * time.Second):
			fmt.Fprintf(&b, "--- kubectl mpi logs %s -f had not ended 30 s after the job\n", name)
		}
	}
	return b.String()
}

// condition is the status and message of a job's condition.
type condition struct{ Status, Message string }

// running is a job's Running condition, empty while it has none.
func running(dir, name string) condition {
	return runningIn(dir, "default", name)
}

// conditionMessages are the messages of a job's conditions, one a line.
func conditionMessages(dir, name string) string {
	out, _ := kubectl(dir, "get", "trainjob", name, "-o", `jsonpath={range .status.conditions[*]}{.message}{"\n"}{end}`)
	return out
}

// runningIn is running for a job of namespace ns.
func runningIn(dir, ns, name string) condition {
	out, _ := kubectl(dir, "get", "trainjob", name, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Running")]}`)
	var c condition
	_ = json.Unmarshal([]byte(out), &c)
	return c
}

// localVariant applies a TrainingRuntime made from a local runtime,
// changed by edit.
func localVariant(dir, name string, edit func(role string, ps *corev1.PodSpec, spec *batchv1.JobSpec)) {
	GinkgoHelper()
	rt := localRuntime(dir, "torus-openmpi-local")
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
		edit(rj.Name, &rj.Template.Spec.Template.Spec, &rj.Template.Spec)
	}
	apply(dir, &trainer.TrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: rt.Labels},
		Spec:       rt.Spec,
	})
}

// uid is the UID of an object in the default namespace.
func uid(dir, kind, name string) string {
	GinkgoHelper()
	out, code := kubectl(dir, "get", kind, name, "-o", "jsonpath={.metadata.uid}")
	Expect(code).To(Equal(0), out)
	return out
}

// background is a command running beside the spec that started it; the
// spec that checks its outcome waits for it.
type background struct {
	done chan struct{}
	out  string
	code int
}

// inBackground starts a command; it is killed after 4 minutes, longer
// than any job of the tier may take, or when the node that started it is
// cleaned up (a logs -f whose job never ends, after a failure, or a
// focused run), so that none outlives the suite.
func inBackground(name string, args ...string) *background {
	b := &background{done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	DeferCleanup(func() {
		cancel()
		<-b.done
	})
	go func() {
		defer GinkgoRecover()
		defer close(b.done)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		GinkgoWriter.Printf("$ %s %s\n%s", filepath.Base(name), strings.Join(args, " "), out)
		b.out = string(out)
		var exit *exec.ExitError
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			b.code = -1
			b.out += "\n(killed after 4 minutes)"
		case ctx.Err() != nil:
			b.code = -1
			b.out += "\n(killed: the spec that started it has ended)"
		case errors.As(err, &exit):
			b.code = exit.ExitCode()
		case err != nil:
			b.code = -1
			b.out += fmt.Sprintf("\n(%v)", err)
		}
	}()
	return b
}

// kubectlMPIInBackground starts this tree's kubectl-mpi against the
// cluster in dir.
func kubectlMPIInBackground(dir string, args ...string) *background {
	return inBackground(filepath.Join(root, "bin", "kubectl-mpi"), append([]string{"--kubeconfig", filepath.Join(dir, "kubeconfig")}, args...)...)
}

// wait is the command's output and exit code once it has ended.
func (b *background) wait() (string, int) {
	<-b.done
	return b.out, b.code
}

// secretKey reads one key of a Secret, decoded.
func secretKey(dir, secret, key string) string {
	GinkgoHelper()
	out, code := kubectl(dir, "get", "secret", secret, "-o", "jsonpath={.data."+strings.ReplaceAll(key, ".", "\\.")+"}")
	Expect(code).To(Equal(0), out)
	data, err := base64.StdEncoding.DecodeString(out)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// localRuntime reads a ClusterTrainingRuntime of the cluster in dir.
func localRuntime(dir, name string) *trainer.ClusterTrainingRuntime {
	GinkgoHelper()
	out, code := kubectl(dir, "get", "clustertrainingruntime", name, "-o", "json")
	Expect(code).To(Equal(0), out)
	var rt trainer.ClusterTrainingRuntime
	Expect(json.Unmarshal([]byte(out), &rt)).To(Succeed())
	return &rt
}

// apply writes an object to a file and applies it with kubectl.
func apply(dir string, obj any) {
	GinkgoHelper()
	data, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	f := filepath.Join(dir, fmt.Sprintf("object-%d.json", time.Now().UnixNano()))
	Expect(os.WriteFile(f, data, 0o644)).To(Succeed())
	out, code := kubectl(dir, "apply", "-f", f)
	Expect(code).To(Equal(0), out)
}
