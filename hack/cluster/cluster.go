package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/controlplane"
	"github.com/torus-mpi/torus/operator/scheme"
)

// startOrder is the order components start in; they stop in reverse.
var startOrder = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
	"jobset", "kueue", "torus-operator",
}

type cluster struct {
	dir      string
	testbin  string
	operator string
	nodes    int

	ports  ports
	ca     *controlplane.Authority
	config *rest.Config
	client client.Client
}

// ports are allocated free on 127.0.0.1 at start and kept in ports.json.
type ports struct {
	Etcd, EtcdPeer, APIServer, Kwok         int
	JobSetWebhook, JobSetHealth             int
	KueueWebhook, KueueHealth, KueueMetrics int
	TorusWebhook, TorusHealth, TorusMetrics int
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *cluster) allocatePorts() error {
	for _, p := range []*int{
		&c.ports.Etcd, &c.ports.EtcdPeer, &c.ports.APIServer, &c.ports.Kwok,
		&c.ports.JobSetWebhook, &c.ports.JobSetHealth,
		&c.ports.KueueWebhook, &c.ports.KueueHealth, &c.ports.KueueMetrics,
		&c.ports.TorusWebhook, &c.ports.TorusHealth, &c.ports.TorusMetrics,
	} {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("allocating a port: %w", err)
		}
		*p = port
	}
	data, err := json.MarshalIndent(c.ports, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, "ports.json"), data, 0o644)
}

func (c *cluster) bin(name string) string { return filepath.Join(c.testbin, name) }

func (c *cluster) up(ctx context.Context) error {
	if running := c.running(); len(running) > 0 {
		return fmt.Errorf("a cluster is already running from %s (%d processes): run `make cluster-down` first", c.dir, len(running))
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset-controller", "kueue"} {
		if _, err := os.Stat(c.bin(b)); err != nil {
			return fmt.Errorf("%s is missing: run `make testbin TESTBIN_COMPONENTS=cluster`", c.bin(b))
		}
	}
	if c.operator != "" {
		if _, err := os.Stat(c.operator); err != nil {
			return fmt.Errorf("%s is missing: run `make build`", c.operator)
		}
	}
	_ = os.RemoveAll(c.dir)
	for _, d := range []string{"logs", "pids", "config", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := c.allocatePorts(); err != nil {
		return err
	}
	var err error
	if c.ca, err = controlplane.NewAuthority(filepath.Join(c.dir, "pki"), "torus-local-ca"); err != nil {
		return fmt.Errorf("making certificates: %w", err)
	}
	type step struct {
		name string
		run  func(context.Context) error
	}
	steps := []step{
		{"etcd", c.startEtcd},
		{"kube-apiserver", c.startAPIServer},
		{"controller-manager and scheduler", c.startControllers},
		{"CRDs", c.installCRDs},
		{"kwok and nodes", c.startKwok},
		{"JobSet", c.startJobSet},
		{"Kueue", c.startKueue},
	}
	if c.operator != "" {
		steps = append(steps, step{"Torus operator", c.startOperator})
	}
	for _, s := range steps {
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

func (c *cluster) down() {
	c.stopAll()
	// Keep the logs of the last run for whoever investigates a failure.
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		if e.Name() != "logs" {
			_ = os.RemoveAll(filepath.Join(c.dir, e.Name()))
		}
	}
	c.logf("down")
}

func (c *cluster) status() error {
	running := c.running()
	names := make([]string, 0, len(running))
	for n := range running {
		names = append(names, n)
	}
	sort.Strings(names)
	expected := 0
	for _, name := range startOrder {
		// A cluster started with -operator "" runs no operator.
		if name == "torus-operator" && c.operator == "" {
			continue
		}
		expected++
		state := "stopped"
		if pid, ok := running[name]; ok {
			state = "running, pid " + strconv.Itoa(pid)
		}
		fmt.Printf("%-24s %s\n", name, state)
	}
	if len(running) < expected {
		return fmt.Errorf("%d of %d components running", len(running), expected)
	}
	return nil
}

// writeKubeconfig writes the admin kubeconfig and builds a client from it.
func (c *cluster) writeKubeconfig() error {
	server := fmt.Sprintf("https://127.0.0.1:%d", c.ports.APIServer)
	if err := clientcmd.WriteToFile(*c.ca.AdminKubeconfig("torus-local", server), c.kubeconfig()); err != nil {
		return err
	}
	c.config = c.ca.AdminConfig(server)
	c.config.QPS, c.config.Burst = 200, 400
	s := scheme.New()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	var err error
	c.client, err = client.New(c.config, client.Options{Scheme: s})
	return err
}

func (c *cluster) kubeconfig() string { return filepath.Join(c.dir, "kubeconfig") }

// servingCert makes a loopback server's certificate in pki/<name> and
// returns that directory.
func (c *cluster) servingCert(name string) (string, error) {
	dir := filepath.Join(c.ca.Dir, name)
	return dir, c.ca.ServingCert(dir, name)
}

// httpGet checks a health endpoint: 200 means ready.
func (c *cluster) httpGet(ctx context.Context, url string) error {
	var pool *x509.CertPool
	if c.ca != nil {
		pool = c.ca.CertPool()
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if strings.HasPrefix(url, "https://") && c.ca != nil {
		req.Header.Set("Authorization", "Bearer "+c.ca.AdminToken)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
