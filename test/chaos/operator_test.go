package chaos_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/test/framework"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// operatorProcess runs the operator binary as its Deployment does, with the
// ports moved to this machine's loopback, and kills it by its PID.
type operatorProcess struct {
	cmd *exec.Cmd
	// exited closes when the process ends.
	exited chan struct{}
	dir    string
	kills  int
	// leaseNamespace, when set, has the operator elect a leader there, as
	// its Deployment's replicas do.
	leaseNamespace string
	// kubeconfig, when set, replaces the suite's admin kubeconfig.
	kubeconfig string
	// keyNamespace, when set, replaces the suite's namespace of the proof
	// key, for a spec that changes the key.
	keyNamespace string
}

// start runs a new operator process and waits until it admits and leads.
func (o *operatorProcess) start() {
	GinkgoHelper()
	host, port, certDir := fw.WebhookServing()
	probe := framework.FreePort()
	log, err := os.OpenFile(filepath.Join(o.dir, "operator.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	defer log.Close()
	fmt.Fprintf(log, "=== start %d at %s\n", o.kills, time.Now().Format(time.RFC3339Nano))
	// Every start reads the proof key the first one made: a restarted
	// operator recognises the children of the jobs it left.
	keys := keyNamespace
	if o.keyNamespace != "" {
		keys = o.keyNamespace
	}
	election := []string{"--leader-elect=false", "--namespace=" + keys}
	if o.leaseNamespace != "" {
		election = []string{"--leader-elect=true", "--leader-election-namespace=" + o.leaseNamespace}
	}
	o.cmd = exec.Command(binary, append(election,
		"--metrics-bind-address=0", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probe),
		"--install-default-runtimes=false", "--install-monitoring=false", "--launch-image="+framework.LaunchImage,
		"--webhook-host="+host, fmt.Sprint("--webhook-port=", port), "--webhook-cert-dir="+certDir)...)
	kc := kubeconfig
	if o.kubeconfig != "" {
		kc = o.kubeconfig
	}
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
	o.cmd.Stdout, o.cmd.Stderr = log, log
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(o.cmd.Start()).To(Succeed())
	exited := make(chan struct{})
	o.exited = exited
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		close(exited)
	}(o.cmd)
	Eventually(func() error {
		return supervisor.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", probe), nil, "")
	}, time.Minute, 50*time.Millisecond).Should(Succeed(), "the operator did not become ready; see %s", filepath.Join(o.dir, "operator.log"))
}

// kill sends SIGKILL to the operator's process and reaps it.
func (o *operatorProcess) kill() {
	GinkgoHelper()
	Expect(o.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	<-o.exited
	o.kills++
}

// running reports whether the process started last has not exited.
func (o *operatorProcess) running() bool {
	select {
	case <-o.exited:
		return false
	default:
		return true
	}
}

// stop ends the operator at the end of a spec.
func (o *operatorProcess) stop() {
	if o.cmd != nil && o.running() {
		_ = o.cmd.Process.Signal(syscall.SIGKILL)
		<-o.exited
	}
	// The spec's directory goes with it: a failed spec shows the log's end.
	if CurrentSpecReport().Failed() {
		if log, err := os.ReadFile(filepath.Join(o.dir, "operator.log")); err == nil {
			GinkgoWriter.Printf("operator log (last 8 KiB):\n%s\n", log[max(0, len(log)-8<<10):])
		}
	}
}
