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
	"path/filepath"
	"sync"
	"syscall"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/prometheus/procfs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/operator/upstream"
	toruswebhook "github.com/torus-mpi/torus/operator/webhook"
	"github.com/torus-mpi/torus/pkg/scheme"
)

// Framework owns one test control plane and manager.
type Framework struct {
	env    *envtest.Environment
	cancel context.CancelFunc
	done   sync.WaitGroup
	// dir holds the API server's certificates and etcd's data, kept
	// across Restart.
	dir string

	// Config is an admin's; Client is built on it.
	Config *rest.Config
	Client client.Client
	// Writes counts the manager's write requests to the API server.
	Writes *WriteCounter
	// Kubeconfig is an admin kubeconfig file, with Suite's AdminKubeconfig.
	Kubeconfig string
	// NoLaunchImage starts the operator with no image of its own, as one
	// run outside a pod without --launch-image: its launchers start once
	// their workers are Ready, and wait from their own image.
	NoLaunchImage bool
}

// RepoRoot is the repository's top directory (repo.Root).
func RepoRoot() string {
	dir, err := repo.Root()
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return dir
}

// ModuleDir is where a module of the workspace's build list is unpacked;
// the JobSet and Kueue CRDs ship inside their modules.
func ModuleDir(module string) string {
	dir, err := repo.ModuleDir(module, "")
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return dir
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
		"KUBEBUILDER_ASSETS must point at etcd and kube-apiserver: run `make test-integration`, which builds them into .testbin/bin")
	dir, err := os.MkdirTemp("", "torus-envtest-")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	f.dir = dir
	f.env = &envtest.Environment{
		// Directories of its own, not envtest's throwaway ones, so that a
		// restarted API server keeps its certificates and etcd its data.
		ControlPlane: envtest.ControlPlane{
			APIServer: &envtest.APIServer{CertDir: filepath.Join(dir, "apiserver")},
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")},
		},
		CRDDirectoryPaths:     CRDPaths(),
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(RepoRoot(), "kustomize", "webhook")},
		},
	}
	gomega.Expect(os.MkdirAll(f.env.ControlPlane.APIServer.CertDir, 0o700)).To(gomega.Succeed())
	gomega.Expect(os.MkdirAll(f.env.ControlPlane.Etcd.DataDir, 0o700)).To(gomega.Succeed())
	cfg, err := f.env.Start()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	f.Config = cfg
	f.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
}

// LaunchImage is the image the suites' operator delivers its launch agent
// from: no pod of an API server without nodes runs it.
const LaunchImage = "registry.torus.local/torus-operator:test"

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
	others, err := upstream.New(context.Background(), mgr, opts.StatusServer)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	opts.Upstream = others
	if opts.LaunchImage == "" && !f.NoLaunchImage {
		// As a deployed operator knows its own image.
		opts.LaunchImage = LaunchImage
	}
	opts.Webhooks = true
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
	// And the API server must call them: it calls those its informer of
	// webhook configurations holds, which envtest, having created them,
	// does not wait for. A dry run of a job only the validating webhook
	// refuses (its runtime does not exist) says when it does.
	probe := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "torus-webhook-probe", Namespace: metav1.NamespaceDefault},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torus-webhook-probe"}},
	}
	gomega.Eventually(func() error {
		return f.Client.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
	}, Timeout, Interval).Should(gomega.MatchError(gomega.ContainSubstring(`admission webhook "vtrainjob.torus-mpi.io" denied the request`)),
		"the API server calls Torus's webhooks")
	// The controllers' and the embedded upstream webhooks' reads come from
	// the manager's cache, which starts after the webhook server: tests
	// start once it has synced what the controllers watch.
	syncCtx, cancelSync := context.WithTimeout(ctx, Timeout)
	defer cancelSync()
	gomega.Expect(mgr.GetCache().WaitForCacheSync(syncCtx)).To(gomega.BeTrue(), "the manager's cache synced")
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
	if f.dir != "" {
		gomega.Expect(os.RemoveAll(f.dir)).To(gomega.Succeed())
	}
}

// Component is a process of the control plane Restart can stop and start.
type Component string

const (
	APIServer Component = "kube-apiserver"
	Etcd      Component = "etcd"
)

// Restart kills a control-plane process with SIGKILL, as a crash or an
// evicted static pod would, leaves it down for the given time, and starts it
// again on the same address with the same certificates and data. (A
// kube-apiserver asked to stop with SIGTERM may wait well past envtest's stop
// timeout for its requests to drain.)
func (f *Framework) Restart(c Component, down time.Duration) {
	ginkgo.GinkgoHelper()
	type process interface {
		Start() error
		Stop() error
	}
	var p process = f.env.ControlPlane.APIServer
	path := f.env.ControlPlane.APIServer.Path
	if c == Etcd {
		p, path = f.env.ControlPlane.Etcd, f.env.ControlPlane.Etcd.Path
	}
	pid := childRunning(path)
	gomega.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(gomega.Succeed(), "killing %s (pid %d)", c, pid)
	// envtest reaps it: Stop returns once it has.
	gomega.Expect(p.Stop()).To(gomega.Succeed(), "reaping %s", c)
	time.Sleep(down)
	gomega.Expect(p.Start()).To(gomega.Succeed(), "starting %s again", c)
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

// childRunning is the PID of this process's child running the binary at
// path: envtest keeps its processes' handles to itself. A process's
// executable is its file's real path, so path's symbolic links (a
// .testbin linked from elsewhere) are resolved before comparing.
func childRunning(path string) int {
	ginkgo.GinkgoHelper()
	want, err := filepath.Abs(path)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	want, err = filepath.EvalSymlinks(want)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	fs, err := procfs.NewDefaultFS()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	procs, err := fs.AllProcs()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, p := range procs {
		stat, err := p.Stat()
		if err != nil || stat.PPID != os.Getpid() {
			continue
		}
		if exe, err := p.Executable(); err == nil && exe == want {
			return p.PID
		}
	}
	ginkgo.Fail("no child process runs " + want)
	return 0
}
