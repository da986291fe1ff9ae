// Package olm proves Torus's install paths on the local cluster, started
// without its own operator (test/localcluster -operator ""):
//
//   - least privilege: the real operator binary runs with a token of the
//     CSV's ServiceAccount, on a cluster where only the CSV's permissions are
//     granted, and runs MPI jobs to Complete;
//   - kustomize: the kubernetes overlay, as make manifests renders it, is
//     applied with the suite doing cert-manager's part; its Deployment runs
//     on the real node and reconciles a job to Complete on real pods;
//   - OperatorHub: the real OLM (olm-operator and catalog-operator) installs
//     the bundle from a file-based catalog served on 127.0.0.1, the way
//     OperatorHub does, and refuses a broken bundle with its own reason.
//
// Run it with `make test-olm`, or:
//
//	make build && hack/testbin/build.sh cluster olm
//	go test -count=1 -timeout 30m ./test/olm/ -ginkgo.v
package olm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/test/framework"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// clusterDir is this suite's local cluster; .cluster belongs to make test-e2e.
const clusterDir = "/tmp/torus-olm-cluster"

const (
	timeout  = 3 * time.Minute
	interval = 250 * time.Millisecond
)

var (
	ctx       = context.Background()
	root      string
	workDir   string // binaries, catalogs, certificates and logs of this run
	testbin   string
	adminCfg  *rest.Config
	k8sClient client.Client
	clientset kubernetes.Interface
	s         *runtime.Scheme
	// realNode: the cluster has a real node, on which OLM's Deployment of
	// the operator really runs.
	realNode bool
)

func TestOLM(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Install paths: least privilege and OLM on the local cluster")
}

var _ = BeforeSuite(func() {
	root = framework.RepoRoot()
	testbin = filepath.Join(root, ".testbin", "bin")
	if v := os.Getenv("TESTBIN"); v != "" {
		testbin = filepath.Join(v, "bin")
	}
	for _, b := range []string{"olm", "catalog", "opm", "catalog-server", "kube-apiserver", "kwok"} {
		_, err := os.Stat(filepath.Join(testbin, b))
		Expect(err).NotTo(HaveOccurred(), "%s is missing: run hack/testbin/build.sh cluster olm", b)
	}
	var err error
	workDir, err = os.MkdirTemp("", "torus-olm-test-")
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("work directory (logs, catalog, certificates): %s\n", workDir)
	ports, err := supervisor.NewPorts()
	Expect(err).NotTo(HaveOccurred())
	sup = &supervisor.Supervisor{Ports: ports, LogDir: workDir, Logf: GinkgoWriter.Printf}
	// Keep the logs of a failed run for whoever investigates; a passing
	// run leaves nothing behind.
	DeferCleanup(func() {
		if failed {
			GinkgoWriter.Printf("logs kept in %s\n", workDir)
			return
		}
		Expect(os.RemoveAll(workDir)).To(Succeed())
	})

	By("building the operator from this tree")
	// Static, as the release image holds it: a real node runs it from an
	// image with nothing else in it.
	build := exec.Command("go", "build", "-o", filepath.Join(workDir, "torus-operator"), "./operator/cmd/torus-operator")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building the operator: %s", out)

	By("starting the local cluster without its operator in " + clusterDir)
	run(root, "go", "run", "./test/localcluster", "down", "-dir", clusterDir)
	up := []string{"run", "./test/localcluster", "up", "-dir", clusterDir, "-testbin", testbin, "-operator", ""}
	// With a real node, the operator OLM installs really runs there, from
	// an image of this tree's binary: one is enough here.
	check := exec.Command("go", "run", "./test/localcluster", "node-check", "-testbin", testbin)
	check.Dir = root
	if out, err := check.CombinedOutput(); err == nil {
		realNode = true
		up = append(up, "-real-node", "-real-nodes", "1", "-operator-image", filepath.Join(workDir, "torus-operator"))
	} else {
		GinkgoWriter.Printf("no real node here (%s): the operator OLM installs runs on a kwok node\n", strings.TrimSpace(string(out)))
	}
	run(root, "go", up...)
	DeferCleanup(func() {
		run(root, "go", "run", "./test/localcluster", "down", "-dir", clusterDir)
	})

	adminCfg, err = clientcmd.BuildConfigFromFlags("", filepath.Join(clusterDir, "kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	adminCfg.QPS, adminCfg.Burst = 100, 200
	s = scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(operatorsv1alpha1.AddToScheme(s))
	utilruntime.Must(operatorsv1.AddToScheme(s))
	k8sClient, err = client.New(adminCfg, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(adminCfg)
	Expect(err).NotTo(HaveOccurred())
})

// failed records whether any spec failed, for the cleanup above.
var failed bool

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		failed = true
	}
})

// run runs a command to completion in dir and returns its standard
// output; the spec's log shows the command, and its output when short or
// when it fails (opm render writes megabytes of CRDs).
func run(dir, name string, args ...string) string {
	GinkgoHelper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	GinkgoWriter.Printf("$ %s %s\n", filepath.Base(name), strings.Join(args, " "))
	if stdout.Len() < 4096 {
		GinkgoWriter.Print(stdout.String())
	}
	GinkgoWriter.Print(stderr.String())
	Expect(err).NotTo(HaveOccurred(), "%s %v failed:\n%s%s", name, args, stdout.String(), stderr.String())
	return stdout.String()
}
