// Package client gives kubectl-mpi's commands their API clients from the
// kubeconfig flags (-n, --context, --kubeconfig, --as, --token, ...), so
// that tests can hand commands their own API server.
package client

import (
	"fmt"
	"sync"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/pkg/version"
)

// Getter is what commands need from the command line's cluster settings.
// Clients are built once and shared.
type Getter interface {
	genericclioptions.RESTClientGetter
	// Namespace is -n, or else the kubeconfig context's namespace, or
	// "default".
	Namespace() (string, error)
	// Client reads and writes Torus's types (TrainJobs, runtimes, JobSets,
	// Kueue objects) and core Kubernetes types, and watches them.
	Client() (ctrlclient.WithWatch, error)
	// Kubernetes is the typed clientset, for pod logs and exec.
	Kubernetes() (kubernetes.Interface, error)
	// Dynamic reads and writes types without their Go client (migrate's
	// MPIJobs, whose CRD may be gone).
	Dynamic() (dynamic.Interface, error)
	// RESTConfig is the configuration the clients are built on.
	RESTConfig() (*rest.Config, error)
}

// New wraps kubeconfig flags.
func New(flags *genericclioptions.ConfigFlags) Getter {
	return &getter{ConfigFlags: flags}
}

type getter struct {
	*genericclioptions.ConfigFlags

	mu     sync.Mutex
	config *rest.Config
	client ctrlclient.WithWatch
	kube   kubernetes.Interface
	dyn    dynamic.Interface
}

func (g *getter) Namespace() (string, error) {
	ns, _, err := g.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

func (g *getter) RESTConfig() (*rest.Config, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.restConfigLocked()
}

func (g *getter) restConfigLocked() (*rest.Config, error) {
	if g.config != nil {
		return g.config, nil
	}
	cfg, err := g.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	// No client-side rate limit, as controller-runtime's own configs:
	// the API server's Priority and Fairness protects it, and logs, which
	// reads one log per pod, bounds the reads it has open itself. A
	// token bucket (client-go's default is 5 a second) would make a
	// 4,096-worker job's logs wait on the client, not the cluster.
	cfg.QPS = -1
	cfg.UserAgent = "kubectl-mpi/" + version.Version
	g.config = cfg
	return cfg, nil
}

func (g *getter) Client() (ctrlclient.WithWatch, error) {
	return cached(g, &g.client, "the API client", func(cfg *rest.Config) (ctrlclient.WithWatch, error) {
		// kubectl's mapper, on discovery cached on disk as kubectl caches
		// it: a command's first read then waits for no discovery requests.
		mapper, err := g.ToRESTMapper()
		if err != nil {
			return nil, err
		}
		return ctrlclient.NewWithWatch(cfg, ctrlclient.Options{Scheme: scheme.New(), Mapper: mapper})
	})
}

func (g *getter) Kubernetes() (kubernetes.Interface, error) {
	return cached(g, &g.kube, "the Kubernetes client", func(cfg *rest.Config) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(cfg)
	})
}

func (g *getter) Dynamic() (dynamic.Interface, error) {
	return cached(g, &g.dyn, "the cluster client", func(cfg *rest.Config) (dynamic.Interface, error) {
		return dynamic.NewForConfig(cfg)
	})
}

// cached builds a client from the shared REST config once and keeps it in
// slot for the command's other steps.
func cached[T comparable](g *getter, slot *T, what string, build func(*rest.Config) (T, error)) (T, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var zero T
	if *slot != zero {
		return *slot, nil
	}
	cfg, err := g.restConfigLocked()
	if err != nil {
		return zero, err
	}
	c, err := build(cfg)
	if err != nil {
		return zero, fmt.Errorf("building %s: %w", what, err)
	}
	*slot = c
	return c, nil
}

// Clients returns both clients, for the commands that read Torus's types
// and also need pods' logs, exec or metrics.
func Clients(g Getter) (ctrlclient.WithWatch, kubernetes.Interface, error) {
	c, err := g.Client()
	if err != nil {
		return nil, nil, err
	}
	kube, err := g.Kubernetes()
	if err != nil {
		return nil, nil, err
	}
	return c, kube, nil
}
