package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// clusterOperator is the operator process test/localcluster started, known by
// its PID file; it is killed by that PID and started again with the same
// command line, so `down` finds and stops the new one.
type clusterOperator struct {
	dir  string
	argv []string
	// lives counts the operator's starts; each keeps its own log.
	lives int
}

func (o *clusterOperator) pidFile() string { return filepath.Join(o.dir, "pids", "torus-operator.pid") }
func (o *clusterOperator) logFile() string { return filepath.Join(o.dir, "logs", "torus-operator.log") }

func (o *clusterOperator) pid() int {
	GinkgoHelper()
	data, err := os.ReadFile(o.pidFile())
	Expect(err).NotTo(HaveOccurred())
	var pid int
	_, err = fmt.Sscan(string(data), &pid)
	Expect(err).NotTo(HaveOccurred())
	return pid
}

// kill sends SIGKILL to the running operator, as an OOM kill or a lost
// node would, and waits until it is gone.
func (o *clusterOperator) kill() {
	GinkgoHelper()
	pid := o.pid()
	if o.argv == nil {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		Expect(err).NotTo(HaveOccurred())
		o.argv = strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	}
	Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	Eventually(func() bool { return supervisor.Alive(pid) }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())
}

// start runs the operator again on the ports of the one killed (the
// webhook configuration names them) and waits until it is ready; it
// leads once the killed one's lease runs out.
func (o *clusterOperator) start() {
	GinkgoHelper()
	o.lives++
	Expect(os.Rename(o.logFile(), fmt.Sprintf("%s.%d", o.logFile(), o.lives))).To(Succeed())
	p, err := supervisor.Start(supervisor.Spec{Name: "torus-operator", Argv: o.argv, Log: o.logFile(), Detach: true,
		Env: []string{"KUBECONFIG=" + filepath.Join(o.dir, "kubeconfig")}})
	Expect(err).NotTo(HaveOccurred())
	Expect(supervisor.WritePIDFile(o.pidFile(), p.PID())).To(Succeed())
	probe := ""
	for _, a := range o.argv {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address="); ok {
			probe = v
		}
	}
	Expect(probe).NotTo(BeEmpty(), "the operator's command line names no probe address: %q", o.argv)
	Eventually(func() error {
		if p.Exited() {
			return StopTrying(fmt.Sprintf("the restarted operator exited: %v\n%s", p.ExitError(), supervisor.Tail(o.logFile(), 20)))
		}
		return supervisor.HTTPGet(context.Background(), "http://"+probe+"/readyz", nil, "")
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
}

// realNodeChaos runs MPI jobs on real pods (Kueue, the JobSet and Job
// controllers, the kubelet and containerd) while the operator is killed
// with SIGKILL at random moments: the paths that read pods, lift their
// scheduling gate and make keys at Kueue's resume must each pick up where
// the killed operator left off.
func realNodeChaos(dirp *string) {
	It("the operator killed with SIGKILL at random moments: every Kueue-queued job on real pods completes, and its keys go", func() {
		dir := *dirp
		jobs := []string{"chaos-0", "chaos-1", "chaos-2"}
		followed := map[string]*background{}
		for _, name := range jobs {
			// The pause keeps each job running across a kill or two.
			out, code := kubectlMPI(dir, "run", name, "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2",
				"--queue", "real", "--", "sh", "-c", "sleep 5 && exec "+strings.Join(piCommand["torus-openmpi-local"], " "))
			Expect(code).To(Equal(0), out)
			followed[name] = kubectlMPIInBackground(dir, "logs", name, "-f")
			DeferCleanup(func() { kubectlMPI(dir, "delete", name) })
		}
		op := &clusterOperator{dir: dir}
		// A seed of its own per run, printed: a failure can be replayed.
		seed := time.Now().UnixNano()
		GinkgoWriter.Printf("kill schedule seed %d\n", seed)
		random := rand.New(rand.NewPCG(uint64(seed), 0))
		for kill := range 4 {
			time.Sleep(time.Duration(500+random.IntN(5500)) * time.Millisecond)
			By(fmt.Sprintf("kill %d of the operator", kill+1))
			op.kill()
			op.start()
		}
		for _, name := range jobs {
			out, code := kubectlMPI(dir, "wait", name, "--timeout", "4m")
			if code != 0 {
				Fail(fmt.Sprintf("job %s did not complete across the operator's kills (exit %d):\n%s\n%s\n--- the operator's log\n%s",
					name, code, out, jobReport(dir, name, followed[name]), supervisor.Tail(op.logFile(), 40)))
			}
			out, _ = kubectlMPI(dir, "logs", name, "--launcher")
			Expect(out).To(MatchRegexp(piResult))
			out, _ = kubectl(dir, "get", "jobset", name, "-o", "jsonpath={.status.restarts}")
			Expect(out).To(BeElementOf("", "0"), "a kill of the operator restarted job %s", name)
			Eventually(func() string {
				out, _ := kubectl(dir, "get", "secret", "-l", "torus-mpi.io/job-name="+name, "-o", "name")
				return out
			}, time.Minute, time.Second).Should(BeEmpty(), "job %s ended with its keys left", name)
		}
		By("no kill lost a pod behind Torus's gate, or left a second operator running")
		out, _ := kubectl(dir, "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.schedulingGates}{"\n"}{end}`)
		Expect(out).NotTo(ContainSubstring("torus-mpi.io/ssh-keys"))
		Expect(regexp.MustCompile(`torus-operator\s+running`).MatchString(mustStatus(dir))).To(BeTrue())
	})
}

func mustStatus(dir string) string {
	GinkgoHelper()
	out, code := clusterCmd(dir, "status")
	Expect(code).To(Equal(0), out)
	return out
}
