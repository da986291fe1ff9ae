package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/framework"
)

// These helpers run the real kubectl-mpi binary against the local cluster,
// as a user would.

var (
	pluginOnce sync.Once
	pluginPath string
)

// pluginBinary builds kubectl-mpi from this tree once per run, into
// .testbin (build output, ignored by git), replacing the last run's.
func pluginBinary() string {
	pluginOnce.Do(func() {
		pluginPath = filepath.Join(framework.RepoRoot(), ".testbin", "e2e", "kubectl-mpi")
		build := exec.Command("go", "build", "-o", pluginPath, "./plugin/cmd/kubectl-mpi")
		build.Dir = framework.RepoRoot()
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "building kubectl-mpi: %s", out)
	})
	return pluginPath
}

// clusterKubeconfig is the kubeconfig the suite uses.
func clusterKubeconfig() string {
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		return kc
	}
	return filepath.Join(framework.RepoRoot(), ".cluster", "kubeconfig")
}

// result is how one kubectl mpi invocation ended.
type result struct {
	Stdout, Stderr string
	Code           int
	Took           time.Duration
}

// mpiCmd runs kubectl mpi with the cluster's kubeconfig.
func mpiCmd(args ...string) result {
	return mpiCmdIn("", args...)
}

// mpiCmdIn runs kubectl mpi with standard input.
func mpiCmdIn(stdin string, args ...string) result {
	GinkgoHelper()
	cmd := exec.Command(pluginBinary(), append([]string{"--kubeconfig", clusterKubeconfig()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	r := result{Stdout: out.String(), Stderr: errOut.String(), Took: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		r.Code = exitErr.ExitCode()
	case err != nil:
		Fail("running kubectl mpi: " + err.Error())
	}
	logRun(args, r)
	return r
}

// logRun echoes a run to the test's log, long outputs cut.
func logRun(args []string, r result) {
	out := r.Stdout
	if len(out) > 4096 {
		out = out[:4096] + fmt.Sprintf("\n[... %d more bytes]\n", len(r.Stdout)-4096)
	}
	GinkgoWriter.Printf("$ kubectl mpi %s\n%s%s(exit %d)\n", strings.Join(args, " "), out, r.Stderr, r.Code)
}

// succeed asserts that a kubectl mpi invocation exited 0.
func succeed(r result) result {
	GinkgoHelper()
	Expect(r.Code).To(Equal(0), "kubectl mpi failed:\nstdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	return r
}

// deleteAndWait deletes a job and waits until it, its JobSet and its pods
// are gone: the deletion of a job of hundreds of pods sends each through
// Kueue's pod webhook, which the next spec's first Kueue object then waits
// behind.
func deleteAndWait(namespace, job string) {
	GinkgoHelper()
	succeed(mpiCmd("-n", namespace, "delete", job, "--wait", "--timeout", "5m"))
}

// installSampleRuntimes waits for Torus's runtimes, which run picks from
// --mpi: the operator installs them when it starts.
func installSampleRuntimes() {
	GinkgoHelper()
	for _, name := range samples.RuntimeNames() {
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Name: name}, &trainer.ClusterTrainingRuntime{})
		}, framework.Timeout, framework.Interval).Should(Succeed(), "the operator installs runtime %s", name)
	}
}

// mpiAsync starts kubectl mpi and returns a function that waits for it.
func mpiAsync(args ...string) func() result {
	GinkgoHelper()
	cmd := exec.Command(pluginBinary(), append([]string{"--kubeconfig", clusterKubeconfig()}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	Expect(cmd.Start()).To(Succeed())
	return func() result {
		GinkgoHelper()
		err := cmd.Wait()
		r := result{Stdout: out.String(), Stderr: errOut.String(), Took: time.Since(start)}
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			r.Code = exitErr.ExitCode()
		} else if err != nil {
			Fail("running kubectl mpi: " + err.Error())
		}
		logRun(args, r)
		return r
	}
}

// podOf waits for the running pod of a host of a job.
func podOf(ns, job, role string, index int) string {
	GinkgoHelper()
	return runningPod(trainJobRef(ns, job), role, index).Name
}

func trainJobRef(ns, name string) *trainer.TrainJob {
	tj := &trainer.TrainJob{}
	tj.Namespace, tj.Name = ns, name
	return tj
}
