package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/localcluster/controlplane"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// Namespaces of a run: the measured jobs, the warm-up job that proves the
// contender is reconciling, the 4,096-worker job, and the contenders'
// leader-election leases.
const (
	nsBench     = "bench"
	nsWarmup    = "bench-warmup"
	nsBig       = "bench-big"
	nsSystem    = "bench-system"
	runtimeName = "torus-openmpi"
)

// controlPlane is etcd and kube-apiserver on 127.0.0.1, fresh for each
// measured run, with the Trainer, JobSet and Torus CRDs and the OpenMPI
// runtime both contenders understand.
type controlPlane struct {
	dir     string
	ca      *controlplane.Authority
	apiPort int
	sup     *supervisor.Supervisor
	etcd    *supervisor.Process
	api     *supervisor.Process
	// config talks to the API server directly, without a rate limit: the
	// benchmark's own requests are never counted against a contender.
	config *rest.Config
	client client.Client
}

// crdSources are the CRD files installed into every control plane.
type crdSources struct {
	trainer, jobset, torus string // directories of *.yaml
}

func startControlPlane(ctx context.Context, dir, testbin string, crds crdSources, pin placement) (_ *controlPlane, err error) {
	cp := &controlPlane{dir: dir}
	for _, d := range []string{"pki", "etcd", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			cp.stop()
		}
	}()
	if cp.ca, err = controlplane.NewAuthority(filepath.Join(dir, "pki"), "torus-bench-ca"); err != nil {
		return nil, fmt.Errorf("making certificates: %w", err)
	}
	ports, err := supervisor.NewPorts()
	if err != nil {
		return nil, err
	}
	cp.sup = &supervisor.Supervisor{Ports: ports, LogDir: filepath.Join(dir, "logs"), Logf: logf}
	var etcdPorts []int
	cp.etcd, etcdPorts, err = cp.sup.Run(ctx, supervisor.Component{
		Name: "etcd", Ports: 2, Timeout: 30 * time.Second,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			data := filepath.Join(dir, "etcd")
			if err := os.RemoveAll(data); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{Argv: pin.controlPlane(controlplane.EtcdArgs(filepath.Join(testbin, "etcd"), "bench", data, p[0], p[1]))}, nil
		},
		Ready: func(ctx context.Context, p []int) error {
			return supervisor.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", p[0]), nil, "")
		},
	})
	if err != nil {
		return nil, err
	}
	var apiPorts []int
	cp.api, apiPorts, err = cp.sup.Run(ctx, supervisor.Component{
		Name: "kube-apiserver", Ports: 1,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			// Every 5 to 7.5 minutes an API server lists each resource
			// from etcd and from its watch cache to compare them
			// (DetectCacheInconsistency, on by default): at 10,000
			// jobs that is 20-30 s of CPU, landing at random in one
			// contender's batch or, side by side, in the other's. It
			// costs every contender alike, so it is left out rather
			// than measured as noise.
			argv, err := controlplane.APIServerArgs(filepath.Join(testbin, "kube-apiserver"), cp.ca, etcdPorts[0], p[0], "",
				"--feature-gates=DetectCacheInconsistency=false")
			return supervisor.Spec{Argv: pin.controlPlane(argv)}, err
		},
		Ready: func(ctx context.Context, p []int) error {
			return supervisor.HTTPGet(ctx, fmt.Sprintf("https://127.0.0.1:%d/readyz", p[0]), cp.ca.CertPool(), "")
		},
	})
	if err != nil {
		return nil, err
	}
	apiPort := apiPorts[0]
	cp.apiPort = apiPort
	cp.config = cp.ca.AdminConfig(fmt.Sprintf("https://127.0.0.1:%d", apiPort))
	// No client-side rate limit for the benchmark's own requests.
	cp.config.QPS, cp.config.Burst = -1, 0
	cp.config.UserAgent = "torus-bench"
	s := scheme.New()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if cp.client, err = client.New(cp.config, client.Options{Scheme: s}); err != nil {
		return nil, err
	}
	if err := cp.install(ctx, crds); err != nil {
		return nil, err
	}
	return cp, nil
}

// install creates the CRDs, the namespaces and the OpenMPI runtime.
func (cp *controlPlane) install(ctx context.Context, crds crdSources) error {
	objs, err := repo.ReadCRDs(crds.trainer, crds.jobset, crds.torus)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if err := cp.client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating CRD %s: %w", o.GetName(), err)
		}
		names = append(names, o.GetName())
	}
	if err := supervisor.Poll(ctx, 60*time.Second, func(ctx context.Context) error { return controlplane.CRDsEstablished(ctx, cp.client, names) }); err != nil {
		return err
	}
	for _, ns := range []string{nsBench, nsWarmup, nsBig, nsSystem} {
		if err := cp.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	rt, err := samples.Runtime(runtimeName)
	if err != nil {
		return err
	}
	// A CRD that was just established may still refuse its kind for a
	// moment on the API server's discovery path.
	return supervisor.Poll(ctx, 30*time.Second, func(ctx context.Context) error {
		err := cp.client.Create(ctx, rt.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// writeKubeconfig writes a kubeconfig for the admin against server (the
// counting proxy, for contenders).
func (cp *controlPlane) writeKubeconfig(path, server string) error {
	return clientcmd.WriteToFile(*cp.ca.AdminKubeconfig("bench", server), path)
}

// stop ends the API server, then etcd, and drops etcd's data.
func (cp *controlPlane) stop() {
	if cp.api != nil {
		cp.api.Stop()
	}
	if cp.etcd != nil {
		cp.etcd.Stop()
	}
	_ = os.RemoveAll(filepath.Join(cp.dir, "etcd"))
}

// servingCert writes tls.crt and tls.key for a server on 127.0.0.1 into
// pki/<name>, the layout controller-runtime's webhook server reads.
func (cp *controlPlane) servingCert(name string) (string, error) {
	dir := filepath.Join(cp.dir, "pki", name)
	return dir, cp.ca.ServingCert(dir, name)
}

// fetchProfile saves a CPU profile of the API server (its --profiling is
// on by default; the admin may read /debug/pprof).
func (cp *controlPlane) fetchProfile(ctx context.Context, query, out string) error {
	hc, err := rest.HTTPClientFor(cp.config)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.config.Host+"/debug/pprof/profile"+query, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fetching the API server's profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching the API server's profile: %s", resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
}

// startBare starts a fresh control plane with the counting proxy in front
// of it, and a metadata client of it; stop ends both.
func startBare(ctx context.Context, dir, testbin string, crds crdSources, pin placement) (cp *controlPlane, proxy *countingProxy, mc metadata.Interface, stop func(), err error) {
	if cp, err = startControlPlane(ctx, dir, testbin, crds, pin); err != nil {
		return nil, nil, nil, nil, err
	}
	if proxy, err = startProxy(cp); err != nil {
		cp.stop()
		return nil, nil, nil, nil, err
	}
	stop = func() {
		proxy.stop()
		cp.stop()
	}
	if mc, err = metadata.NewForConfig(cp.config); err != nil {
		stop()
		return nil, nil, nil, nil, err
	}
	return cp, proxy, mc, stop, nil
}
