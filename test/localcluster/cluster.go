package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/test/localcluster/controlplane"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// startOrder is the order components start in; they stop in reverse.
var startOrder = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "openshift-scc", "containerd", "coredns", "kubelet", "kube-router", "kwok",
	"jobset", "kueue", "torus-operator", upstreamTrainer, metricsServerName,
}

type cluster struct {
	dir      string
	testbin  string
	operator string
	// upstream: upstream Trainer's controller reconciles TrainJobs
	// instead of the operator (-upstream-trainer).
	upstream bool
	nodes    int
	// realNode: also real nodes, kubelets and containerd on the host
	// (root); realNodes of them.
	realNode  bool
	realNodes int
	// openshift: OpenShift's pod security (SCCs, namespace allocations,
	// OpenShift's SCC admission) decides every pod.
	openshift bool
	// kueueMPIJob: Kueue also manages Kubeflow's MPIJobs, once their CRD
	// is installed (-kueue-mpijob).
	kueueMPIJob bool
	// podsReadyTimeout is Kueue's waitForPodsReady.timeout.
	podsReadyTimeout time.Duration
	// kueueConcurrency sets how many objects of a kind Kueue reconciles at
	// once, over what its manifests set (kueueConcurrency()).
	kueueConcurrency concurrencyFlag
	// operatorImage is the operator binary the real node gets as the
	// bundle's operator image; operatorImageDefault says it is the
	// -operator binary, imported only when it can be (static).
	operatorImage        string
	operatorImageDefault bool
	// launchBinary is torus-launch built from this tree (launchAgent),
	// once per run.
	launchBinary string
	// image: the image verb's flags.
	image imageOptions
	// kwokAddress is where kwok serves its nodes' kubelet endpoints and
	// the address those nodes report (-kwok-address); empty: 127.0.0.1.
	kwokAddress string
	// metricsServer: metrics-server serves the metrics API
	// (-metrics-server).
	metricsServer bool

	sup *supervisor.Supervisor
	// ports of each component, kept in ports.json for whoever debugs.
	ports  map[string][]int
	ca     *controlplane.Authority
	config *rest.Config
	client client.Client
}

func (c *cluster) writePorts() error {
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
	// A real node of an earlier run that was not cleaned up (a killed
	// `up`): undo it before its record goes with the directory.
	if err := c.cleanRealNode(); err != nil {
		return fmt.Errorf("cleaning up an earlier real node (record in %s): %w", filepath.Join(c.dir, "node.json"), err)
	}
	if err := c.removeKwokAddress(); err != nil {
		return fmt.Errorf("removing an earlier run's kwok address (record in %s): %w", filepath.Join(c.dir, kwokAddressFile), err)
	}
	_ = os.RemoveAll(c.dir)
	for _, d := range []string{"logs", "pids", "config", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	ports, err := supervisor.NewPorts()
	if err != nil {
		return err
	}
	c.ports = map[string][]int{}
	c.sup = &supervisor.Supervisor{
		Ports: ports, LogDir: filepath.Join(c.dir, "logs"), PIDDir: filepath.Join(c.dir, "pids"),
		Detach: true, Logf: c.logf,
	}
	if c.ca, err = controlplane.NewAuthority(filepath.Join(c.dir, "pki"), "torus-local-ca"); err != nil {
		return fmt.Errorf("making certificates: %w", err)
	}
	for _, s := range c.plan() {
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	// Each component was ready when it started; one that died since (a
	// late bind, a crash once its informers synced) fails "up" here.
	return c.allAlive()
}

// apiAddress is where the API server listens: the host's address on the
// real nodes' bridge when there are some, so that they and their pods reach
// it too, else 127.0.0.1.
func (c *cluster) apiAddress() string {
	if c.realNode {
		return hostIP
	}
	return "127.0.0.1"
}

// hasRealNode: this cluster was started with a real node (-real-node
// then, node.json since, for status and down).
func (c *cluster) hasRealNode() bool {
	if c.realNode {
		return true
	}
	_, err := os.Stat(filepath.Join(c.dir, "node.json"))
	return err == nil
}

// runsOpenShift: this cluster was started with -openshift (then, or by
// its PID file since, for status).
func (c *cluster) runsOpenShift() bool {
	if c.openshift {
		return true
	}
	_, ok := c.pids()["openshift-scc"]
	return ok
}

// runsOperator: this cluster was started with the Torus operator (its
// -operator binary and no -upstream-trainer then, or by its PID file
// since, for status and down).
func (c *cluster) runsOperator() bool {
	if c.operator != "" && !c.upstream {
		return true
	}
	_, ok := c.pids()["torus-operator"]
	return ok
}

// runsUpstream: this cluster was started with -upstream-trainer
// (then, or by its PID file since, for status).
func (c *cluster) runsUpstream() bool {
	if c.upstream {
		return true
	}
	_, ok := c.pids()[upstreamTrainer]
	return ok
}

// allAlive fails with the name and log of the first component that is
// not running.
func (c *cluster) allAlive() error {
	running := c.running()
	for _, name := range c.expected() {
		if _, ok := running[name]; !ok {
			return fmt.Errorf("%s is not running; last lines of %s:\n%s", name, c.logFile(name), supervisor.Tail(c.logFile(name), 15))
		}
	}
	return nil
}

func (c *cluster) down() {
	c.stopAll()
	keep := map[string]bool{"logs": true}
	if err := c.removeKwokAddress(); err != nil {
		c.logf("removing kwok's address: %v", err)
		// Its record stays, for the next down or up to try again.
		keep[kwokAddressFile] = true
	}
	if err := c.cleanRealNode(); err != nil {
		c.logf("cleaning up after the real node: %v", err)
		// Its record stays, for the next down or up to try again.
		keep["node.json"] = true
	}
	// Keep the logs of the last run for whoever investigates a failure.
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		if !keep[e.Name()] {
			_ = os.RemoveAll(filepath.Join(c.dir, e.Name()))
		}
	}
	c.logf("down")
}

// status prints each component's state; a component that died shows the
// end of its log. It fails unless every component runs.
func (c *cluster) status() error {
	pids := c.pids()
	running := c.running()
	var dead []string
	for _, name := range c.expected() {
		r, started := pids[name]
		switch _, alive := running[name]; {
		case alive:
			fmt.Printf("%-24s running, pid %d\n", name, r.PID)
		case started:
			dead = append(dead, name)
			fmt.Printf("%-24s DEAD (pid %d exited); last lines of %s:\n%s\n", name, r.PID, c.logFile(name), supervisor.Tail(c.logFile(name), 10))
		default:
			dead = append(dead, name)
			fmt.Printf("%-24s not started\n", name)
		}
	}
	if len(dead) > 0 {
		return fmt.Errorf("%d of %d components not running: %s", len(dead), len(c.expected()), strings.Join(dead, ", "))
	}
	return nil
}

// writeKubeconfig writes the admin kubeconfig and builds a client from it.
func (c *cluster) writeKubeconfig(apiPort int) error {
	server := fmt.Sprintf("https://%s:%d", c.apiAddress(), apiPort)
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

// httpGet checks a health endpoint: 200 means ready. HTTPS servers are
// verified with the local CA and get the admin's token.
func (c *cluster) httpGet(ctx context.Context, url string) error {
	if strings.HasPrefix(url, "https://") {
		return supervisor.HTTPGet(ctx, url, c.ca.CertPool(), c.ca.AdminToken)
	}
	return supervisor.HTTPGet(ctx, url, nil, "")
}
