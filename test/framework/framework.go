// Package framework starts what integration tests run against: a real
// kube-apiserver and etcd (envtest, binaries from .testbin/bin) holding the
// Trainer, JobSet and Kueue CRDs, with Torus's webhooks registered, and the
// Torus manager.
package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/operator/scheme"
	"github.com/torus-mpi/torus/operator/upstream"
	toruswebhook "github.com/torus-mpi/torus/operator/webhook"
)

// Framework owns one test control plane and manager.
type Framework struct {
	env    *envtest.Environment
	cancel context.CancelFunc
	done   sync.WaitGroup

	// Config is an admin's; Client is built on it.
	Config *rest.Config
	Client client.Client
	// Writes counts the manager's write requests to the API server.
	Writes *WriteCounter
	// Kubeconfig is an admin kubeconfig file, with Suite's AdminKubeconfig.
	Kubeconfig string
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	dir, err := os.Getwd()
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			ginkgo.Fail("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ModuleDir is where a module of the build list is unpacked; the JobSet and
// Kueue CRDs ship inside their modules.
func ModuleDir(module string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred(), "locating module %s", module)
	return strings.TrimSpace(string(out))
}

// CRDPaths are the CRDs Torus works with: Trainer's as Torus ships them,
// Torus's own, and JobSet's, Kueue's and Multus's NetworkAttachmentDefinition
// from their pinned modules.
func CRDPaths() []string {
	root := RepoRoot()
	return []string{
		filepath.Join(root, "kustomize", "crd", "trainer"),
		filepath.Join(root, "kustomize", "crd", "torus"),
		filepath.Join(ModuleDir("sigs.k8s.io/jobset"), "config", "components", "crd", "bases"),
		filepath.Join(ModuleDir("sigs.k8s.io/kueue"), "config", "components", "crd", "bases"),
		filepath.Join(ModuleDir("github.com/k8snetworkplumbingwg/network-attachment-definition-client"), "artifacts", "networks-crd.yaml"),
	}
}

// Init starts the API server with the CRDs and webhook configurations.
func (f *Framework) Init() {
	ginkgo.GinkgoHelper()
	ctrl.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	gomega.Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(gomega.BeEmpty(),
		"KUBEBUILDER_ASSETS must point at etcd and kube-apiserver: run `make integration`, which builds them into .testbin/bin")
	f.env = &envtest.Environment{
		CRDDirectoryPaths:     CRDPaths(),
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(RepoRoot(), "kustomize", "webhook")},
		},
	}
	cfg, err := f.env.Start()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	f.Config = cfg
	f.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
}

// StartManager runs Torus's controllers and webhooks against the API server.
// The manager's client counts its writes in f.Writes.
func (f *Framework) StartManager(opts controller.Options) {
	ginkgo.GinkgoHelper()
	f.Writes = &WriteCounter{}
	cfg := rest.CopyConfig(f.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return f.Writes.Wrap(rt) }
	wh := f.env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   controller.CacheOptions(),
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
		}),
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	others, err := upstream.New(context.Background(), mgr)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	opts.Upstream = others
	gomega.Expect(controller.SetupControllers(mgr, opts)).To(gomega.Succeed())
	hooks, err := others.Webhooks(mgr)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(toruswebhook.SetupWebhooks(mgr, opts.MaxNodes, hooks)).To(gomega.Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done.Add(1)
	go func() {
		defer ginkgo.GinkgoRecover()
		defer f.done.Done()
		gomega.Expect(mgr.Start(ctx)).To(gomega.Succeed())
	}()
	// Webhooks must answer before tests create objects.
	gomega.Eventually(func() error {
		return mgr.GetWebhookServer().StartedChecker()(nil)
	}, Timeout, Interval).Should(gomega.Succeed())
}

// Teardown stops the manager and the control plane.
func (f *Framework) Teardown() {
	ginkgo.GinkgoHelper()
	if f.cancel != nil {
		f.cancel()
		f.done.Wait()
	}
	if f.env != nil {
		gomega.Expect(f.env.Stop()).To(gomega.Succeed())
	}
}

// WriteCounter counts non-read requests going through a transport.
type WriteCounter struct {
	mu     sync.Mutex
	writes []string
}

// Wrap returns a transport that counts writes on the way through.
func (c *WriteCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			c.mu.Lock()
			c.writes = append(c.writes, req.Method+" "+req.URL.Path)
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// Count is the number of writes so far.
func (c *WriteCounter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// Since lists the writes after the first n, for failure messages.
func (c *WriteCounter) Since(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes[n:]...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// String implements fmt.Stringer for failure messages.
func (c *WriteCounter) String() string { return fmt.Sprintf("%d writes", c.Count()) }

// WebhookServing is where the API server sends admission requests: the
// webhook configurations name this host and port, and trust the
// certificate in certDir (tls.crt, tls.key).
func (f *Framework) WebhookServing() (host string, port int, certDir string) {
	wh := f.env.WebhookInstallOptions
	return wh.LocalServingHost, wh.LocalServingPort, wh.LocalServingCertDir
}
