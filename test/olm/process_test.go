package olm

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// sup starts this suite's processes the way test/localcluster starts the
// local cluster's: ports outside the ephemeral range, ready before use,
// stopped by PID. Set in BeforeSuite.
var sup *supervisor.Supervisor

// start runs a process that is handed no ports, with its output in
// <workDir>/<name>.log, and stops it when the spec's container ends.
func start(name string, env []string, argv ...string) *supervisor.Process {
	GinkgoHelper()
	p, err := supervisor.Start(supervisor.Spec{Name: name, Argv: argv, Env: env, Log: filepath.Join(workDir, name+".log")})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("started %s, pid %d, log %s\n", name, p.PID(), p.Log)
	DeferCleanup(stop, p)
	return p
}

// run starts a component on ports the supervisor hands out and returns
// once it is ready, with its ports; it is stopped when the spec's
// container ends.
func runComponent(c supervisor.Component) (*supervisor.Process, []int) {
	GinkgoHelper()
	p, ports, err := sup.Run(ctx, c)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("started %s, pid %d, ports %v, log %s\n", c.Name, p.PID(), ports, p.Log)
	DeferCleanup(stop, p)
	return p, ports
}

func stop(p *supervisor.Process) {
	p.Stop()
	GinkgoWriter.Printf("stopped %s, pid %d\n", p.Name, p.PID())
}

// logLines returns the lines of a process's log that contain any of the
// given substrings, case-insensitively.
func logLines(p *supervisor.Process, subs ...string) []string {
	GinkgoHelper()
	f, err := os.Open(p.Log)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.ToLower(sc.Text())
		for _, s := range subs {
			if strings.Contains(line, strings.ToLower(s)) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}

// loopbackOnly fails unless every address the process listens on is on a
// loopback IP.
func loopbackOnly(p *supervisor.Process) {
	GinkgoHelper()
	addrs, err := supervisor.Listeners(p.PID())
	Expect(err).NotTo(HaveOccurred())
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		Expect(err).NotTo(HaveOccurred())
		Expect(net.ParseIP(host).IsLoopback()).To(BeTrue(), "%s listens on %s, beyond loopback", p.Name, a)
	}
	GinkgoWriter.Printf("%s listens on %v\n", p.Name, addrs)
}
