package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/operator/scheme"
	"github.com/torus-mpi/torus/samples"
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
	ca      *x509.Certificate
	caKey   *ecdsa.PrivateKey
	caFile  string
	token   string
	apiPort int
	etcd    *proc
	api     *proc
	// config talks to the API server directly, without a rate limit: the
	// benchmark's own requests are never counted against a contender.
	config *rest.Config
	client client.Client
}

// crdSources are the CRD files installed into every control plane.
type crdSources struct {
	trainer, jobset, torus string // directories of *.yaml
}

func startControlPlane(ctx context.Context, dir, testbin string, crds crdSources) (_ *controlPlane, err error) {
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
	if err := cp.makePKI(); err != nil {
		return nil, fmt.Errorf("making certificates: %w", err)
	}
	etcdPort, peerPort, apiPort := freePort(), freePort(), freePort()
	cp.apiPort = apiPort
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cp.etcd, err = startProc(filepath.Join(dir, "logs", "etcd.log"), nil,
		filepath.Join(testbin, "etcd"), "--name=bench", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=bench="+peerURL, "--listen-metrics-urls=",
		// Measured here is the API server and the controllers, not the
		// disk: the same for every contender.
		"--unsafe-no-fsync")
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 30*time.Second, func(ctx context.Context) error { return httpGet(ctx, nil, etcdURL+"/health") }); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	serving, err := cp.servingCert("kube-apiserver")
	if err != nil {
		return nil, err
	}
	saKey, saPub, err := cp.serviceAccountKey()
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "pki", "tokens.csv")
	if err := os.WriteFile(tokens, []byte(cp.token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	cp.api, err = startProc(filepath.Join(dir, "logs", "kube-apiserver.log"), nil,
		filepath.Join(testbin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file="+filepath.Join(serving, "tls.crt"),
		"--tls-private-key-file="+filepath.Join(serving, "tls.key"),
		"--client-ca-file="+cp.caFile,
		"--token-auth-file="+tokens,
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--authorization-mode=RBAC")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cp.ca)
	readyz := fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort)
	if err := waitFor(ctx, 60*time.Second, func(ctx context.Context) error { return httpGet(ctx, pool, readyz) }); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w (log: %s)", err, cp.api.log)
	}
	cp.config = cp.restConfig(fmt.Sprintf("https://127.0.0.1:%d", apiPort))
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
	var names []string
	for _, dir := range []string{crds.trainer, crds.jobset, crds.torus} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		for _, f := range files {
			objs, err := repo.ReadObjects(f)
			if err != nil {
				return err
			}
			for _, o := range objs {
				if o.GetKind() != "CustomResourceDefinition" {
					continue // e.g. a kustomization.yaml
				}
				if err := cp.client.Create(ctx, o); err != nil {
					return fmt.Errorf("creating CRD from %s: %w", f, err)
				}
				names = append(names, o.GetName())
			}
		}
	}
	if err := waitFor(ctx, 60*time.Second, func(ctx context.Context) error { return cp.established(ctx, names) }); err != nil {
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
	return waitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		err := cp.client.Create(ctx, rt.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

func (cp *controlPlane) established(ctx context.Context, names []string) error {
	for _, n := range names {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := cp.client.Get(ctx, client.ObjectKey{Name: n}, &crd); err != nil {
			return err
		}
		ok := false
		for _, c := range crd.Status.Conditions {
			ok = ok || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		if !ok {
			return fmt.Errorf("CRD %s not established", n)
		}
	}
	return nil
}

// restConfig is an admin configuration for a server signed by the CA.
func (cp *controlPlane) restConfig(server string) *rest.Config {
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cp.ca.Raw})
	return &rest.Config{Host: server, BearerToken: cp.token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
}

// writeKubeconfig writes a kubeconfig for the admin against server (the
// counting proxy, for contenders).
func (cp *controlPlane) writeKubeconfig(path, server string) error {
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cp.ca.Raw})
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.token}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}

// stop ends the API server, then etcd, and drops etcd's data.
func (cp *controlPlane) stop() {
	if cp.api != nil {
		cp.api.stop()
	}
	if cp.etcd != nil {
		cp.etcd.stop()
	}
	_ = os.RemoveAll(filepath.Join(cp.dir, "etcd"))
}

func (cp *controlPlane) makePKI() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "torus-bench-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if cp.ca, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	cp.caKey = key
	cp.caFile = filepath.Join(cp.dir, "pki", "ca.crt")
	if err := writePEM(cp.caFile, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return err
	}
	cp.token = hex.EncodeToString(token)
	return nil
}

// servingCert writes tls.crt and tls.key for a server on 127.0.0.1 into
// pki/<name>, the layout controller-runtime's webhook server reads.
func (cp *controlPlane) servingCert(name string) (string, error) {
	dir := filepath.Join(cp.dir, "pki", name)
	return dir, cp.servingCertIn(dir, name)
}

func (cp *controlPlane) servingCertIn(dir, name string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, cp.ca, &key.PublicKey, cp.caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "tls.crt"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "tls.key"), "EC PRIVATE KEY", keyDER, 0o600)
}

func (cp *controlPlane) tlsCert(dir string) (tls.Certificate, error) {
	return tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
}

func (cp *controlPlane) serviceAccountKey() (keyFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyFile, pubFile = filepath.Join(cp.dir, "pki", "sa.key"), filepath.Join(cp.dir, "pki", "sa.pub")
	if err := writePEM(keyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600); err != nil {
		return "", "", err
	}
	return keyFile, pubFile, writePEM(pubFile, "PUBLIC KEY", pubDER, 0o644)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free port on 127.0.0.1: %v", err))
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// httpGet succeeds on a 200; pool verifies HTTPS servers.
func httpGet(ctx context.Context, pool *x509.CertPool, url string) error {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// waitFor polls check every 100ms until it succeeds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
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
