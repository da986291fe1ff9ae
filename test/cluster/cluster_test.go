package cluster

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// run runs a command to completion and returns its combined output and
// exit code; the spec's log shows both.
func run(name string, args ...string) (string, int) {
	GinkgoHelper()
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("$ %s %s\n%s", filepath.Base(name), strings.Join(args, " "), out)
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		Expect(ok).To(BeTrue(), "running %s: %v", name, err)
		return string(out), exit.ExitCode()
	}
	return string(out), 0
}

// clusterCmd runs test/localcluster with a verb on dir.
func clusterCmd(dir, verb string, flags ...string) (string, int) {
	GinkgoHelper()
	return run(clusterBin, append([]string{verb, "-dir", dir, "-testbin", testbin}, flags...)...)
}

// brokenOperator is an operator that exits at once, as an operator does
// when another process has taken its metrics port.
func brokenOperator() string {
	GinkgoHelper()
	broken := filepath.Join(GinkgoT().TempDir(), "torus-operator")
	Expect(os.WriteFile(broken, []byte("#!/bin/sh\n"+
		`echo '{"level":"error","msg":"Operator stopped","error":"failed to start metrics server: listen tcp 127.0.0.1:41703: bind: address in use by a test"}'`+
		"\nexit 1\n"), 0o755)).To(Succeed())
	return broken
}

// readPIDs reads a cluster's PID files: each component's process, which
// is alive only while that PID is still the one it started as.
func readPIDs(dir string) map[string]supervisor.PIDRecord {
	GinkgoHelper()
	files, err := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	Expect(err).NotTo(HaveOccurred())
	out := map[string]supervisor.PIDRecord{}
	for _, f := range files {
		r, err := supervisor.ReadPIDFile(f)
		Expect(err).NotTo(HaveOccurred())
		out[strings.TrimSuffix(filepath.Base(f), ".pid")] = r
	}
	return out
}

func ephemeralRange() (int, int) {
	GinkgoHelper()
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	Expect(err).NotTo(HaveOccurred())
	f := strings.Fields(string(data))
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	Expect(err1).NotTo(HaveOccurred())
	Expect(err2).NotTo(HaveOccurred())
	return lo, hi
}

var _ = Describe("test/localcluster", Ordered, func() {
	var dir string

	BeforeAll(func() {
		dir = filepath.Join(GinkgoT().TempDir(), "cluster")
		DeferCleanup(func() {
			// Read before down, which removes the PID files.
			pids := readPIDs(dir)
			clusterCmd(dir, "down")
			for name, r := range pids {
				Expect(r.Alive()).To(BeFalse(), "%s (pid %d) outlived cluster down", name, r.PID)
			}
		})
	})

	It("comes up while another process crowds the ephemeral ports, on ports outside their range", func() {
		By("starting a process that holds hundreds of ephemeral ports and churns hundreds of connections")
		crowd := exec.Command(os.Args[0])
		crowd.Env = append(os.Environ(), "TORUS_PORT_PRESSURE=1")
		session, err := gexec.Start(crowd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill().Wait(10 * time.Second) })
		// It says so once it holds its ports and its connections churn; a
		// fixed pause would start the cluster before that on a busy machine.
		Eventually(session, time.Minute).Should(gbytes.Say(crowding), "the crowding process did not start crowding")
		Expect(session).NotTo(gexec.Exit(), "the crowding process died")

		By("starting the cluster meanwhile")
		out, code := clusterCmd(dir, "up", "-operator", operator)
		Expect(code).To(Equal(0), "cluster up failed:\n%s", out)
		Expect(session).NotTo(gexec.Exit(), "the crowding process died, so it proved nothing")

		By("every component runs, each on ports outside the ephemeral range")
		out, code = clusterCmd(dir, "status")
		Expect(code).To(Equal(0), out)
		data, err := os.ReadFile(filepath.Join(dir, "ports.json"))
		Expect(err).NotTo(HaveOccurred())
		var ports map[string][]int
		Expect(json.Unmarshal(data, &ports)).To(Succeed())
		Expect(ports).To(HaveKey("torus-operator"))
		lo, hi := ephemeralRange()
		seen := map[int]string{}
		for name, ps := range ports {
			for _, p := range ps {
				Expect(p < lo || p > hi).To(BeTrue(), "%s got port %d, inside the ephemeral range %d-%d", name, p, lo, hi)
				Expect(seen).NotTo(HaveKey(p), "port %d handed to %s and %s", p, seen[p], name)
				seen[p] = name
			}
		}
	})

	It("names a component that died, with the end of its log, in status", func() {
		op := readPIDs(dir)["torus-operator"]
		pid := op.PID
		Expect(pid).NotTo(BeZero())
		Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
		Eventually(op.Alive, 10*time.Second).Should(BeFalse())

		out, code := clusterCmd(dir, "status")
		Expect(code).NotTo(Equal(0), "status passed with the operator dead")
		Expect(out).To(MatchRegexp(`torus-operator\s+DEAD \(pid %d exited\); last lines of \S+torus-operator.log`, pid))
		Expect(out).To(MatchRegexp(`kueue\s+running, pid \d+`))
		Expect(out).To(ContainSubstring("1 of 8 components not running: torus-operator"))
	})

	It("stops every process by PID and refuses to report up a cluster whose component dies at start-up", func() {
		pids := readPIDs(dir)
		out, code := clusterCmd(dir, "down")
		Expect(code).To(Equal(0), out)
		for name, r := range pids {
			Expect(r.Alive()).To(BeFalse(), "%s (pid %d) outlived cluster down", name, r.PID)
		}

		By("an operator that exits at once, as one whose metrics port is taken does")
		out, code = clusterCmd(dir, "up", "-operator", brokenOperator())
		Expect(code).NotTo(Equal(0), "cluster up reported a cluster without its operator as up")
		Expect(out).To(ContainSubstring("torus-operator exited during start-up (exit status 1)"))
		Expect(out).To(ContainSubstring("failed to start metrics server"))
		Expect(out).NotTo(ContainSubstring("up in"))
		started := regexp.MustCompile(`started (\S+)\s+pid (\d+)`).FindAllStringSubmatch(out, -1)
		Expect(len(started)).To(BeNumerically(">=", 7), "the components before the operator were started")
		for _, m := range started {
			pid, err := strconv.Atoi(m[2])
			Expect(err).NotTo(HaveOccurred())
			Expect(supervisor.Alive(pid)).To(BeFalse(), "%s (pid %d) left running after a failed cluster up", m[1], pid)
		}
	})
})
