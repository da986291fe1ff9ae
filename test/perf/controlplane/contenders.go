package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
	"github.com/torus-mpi/torus/test/localcluster/upstreamtrainer"
)

// benchLaunchImage is the image the measured operator and the floor give
// jobs' launch agent: no pod runs here, so it is a name only.
const benchLaunchImage = "registry.torus.local/torus-operator:bench"

// contender is one controller configuration measured, or the floor: the
// benchmark itself creating every object with no controller at all.
type contender struct {
	Name  string // short name, used in file names
	Label string // as the table shows it
	Kind  string // "torus", "upstream" or "floor"
	// QPS and Burst override the contender's own client defaults when set.
	QPS   float32
	Burst int
	// Steady: measure writes per minute at rest after the largest N.
	Steady bool
	// Flags are extra operator flags (Torus only).
	Flags []string
	// TwoObjects makes the floor create only the two objects Torus does
	// (the JobSet, and the Secret that carries the hostfile), not the
	// hostfile ConfigMap upstream and mpi-operator add: the least API-server
	// work any controller making Torus's objects can cost, so that Torus
	// against it is the price of being a controller (its watches).
	TwoObjects bool
	// Behind, for a floor, has its objects created by this many workers
	// taking the TrainJobs from a queue as they are created, as a
	// controller's workers do, rather than by each creator right after its
	// TrainJob: the arrival of a controller's requests without its
	// watches.
	Behind int
	// OnRequest contenders run only when -contenders names them.
	OnRequest bool
	// LargestOnly runs the contender at the largest N alone (of those up
	// to MaxN).
	LargestOnly bool
	// MaxN, when set, is the largest N the contender runs at: the
	// comparisons at equal client rates are not repeated at N = 10,000.
	MaxN int
}

// runsAt reports whether c runs at n, given every N of the invocation.
func (c contender) runsAt(n int, sizes []int) bool {
	if c.MaxN > 0 && n > c.MaxN {
		return false
	}
	if !c.LargestOnly {
		return true
	}
	largest := 0
	for _, s := range sizes {
		if c.MaxN == 0 || s <= c.MaxN {
			largest = max(largest, s)
		}
	}
	return n == largest
}

// makesConfigMap reports whether a job's objects include a hostfile
// ConfigMap: upstream's do, and the three-object floor's.
func (c contender) makesConfigMap() bool {
	return c.Kind == kindUpstream || (c.Kind == kindFloor && !c.TwoObjects)
}

const (
	kindTorus    = "torus"
	kindUpstream = "upstream"
	kindFloor    = "floor"
)

// allContenders: each contender with its defaults, then with equal client
// rates both ways (upstream at Torus's 500/1000, Torus at upstream's
// 50/100), and the floor.
var allContenders = []contender{
	{Name: "floor", Label: "floor (direct client, no controller)", Kind: kindFloor},
	{Name: "floor2", Label: "two-object floor (Torus's objects, direct client)", Kind: kindFloor, TwoObjects: true, OnRequest: true},
	// The objects made as a controller's reconciles make them, behind
	// their TrainJobs, with no watch.
	{Name: "floor2-behind", Label: "two-object floor, objects made by 10 workers behind the TrainJobs", Kind: kindFloor, TwoObjects: true, Behind: 10, OnRequest: true},
	{Name: "torus", Label: "Torus, defaults (QPS 500/1000)", Kind: kindTorus, Steady: true},
	{Name: "upstream", Label: "upstream v2.3.0, defaults (QPS 50/100)", Kind: kindUpstream, Steady: true},
	{Name: "upstream-qps500", Label: "upstream v2.3.0, QPS 500/1000", Kind: kindUpstream, QPS: 500, Burst: 1000, MaxN: 1000},
	{Name: "torus-qps50", Label: "Torus, QPS 50/100", Kind: kindTorus, QPS: 50, Burst: 100, MaxN: 1000},
	// The cost of the watch on the Job controller's FailedCreate events,
	// which explains refused pods.
	{Name: "torus-no-event-watch", Label: "Torus, without the FailedCreate events watch", Kind: kindTorus,
		Flags: []string{"--watch-pod-creation-failures=false"}, LargestOnly: true, MaxN: 1000},
}

// binaries are what the contenders run.
type binaries struct {
	testbin  string // etcd, kube-apiserver, kubectl, trainer-controller-manager
	operator string // torus-operator built from this tree
	plugin   string // kubectl-mpi built from this tree
	// upstreamConfig is the Configuration upstream ships
	// (manifests/base/manager/controller_manager_config.yaml).
	upstreamConfig string
}

// running is a started contender.
type running struct {
	proc *supervisor.Process
	// pprof is Torus's pprof address, when asked for.
	pprof string
}

func (r *running) stop() {
	if r != nil && r.proc != nil {
		r.proc.Stop()
	}
}

// jobSetReportTimeout is longer than any batch and its quiet window.
const jobSetReportTimeout = time.Hour

// startContender runs a controller against the counting proxy, with its
// admission webhooks not registered (neither contender's webhooks are
// called; see results.md), and waits until its health endpoint is ready.
func startContender(ctx context.Context, c contender, bins binaries, cp *controlPlane, proxy *countingProxy, dir string, pprof bool, extra []string) (*running, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig-"+c.Name)
	if err := cp.writeKubeconfig(kubeconfig, proxy.URL); err != nil {
		return nil, err
	}
	r := &running{}
	comp := supervisor.Component{
		Name: c.Name, Timeout: 90 * time.Second,
		// The health endpoint is the first port.
		Ready: func(ctx context.Context, p []int) error {
			return supervisor.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p[0]), nil, "")
		},
	}
	env := []string{"KUBECONFIG=" + kubeconfig}
	switch c.Kind {
	case kindTorus:
		comp.Ports = 2 // health, metrics
		if pprof {
			comp.Ports = 3
		}
		comp.Command = func(_ context.Context, p []int) (supervisor.Spec, error) {
			argv := []string{
				bins.operator,
				"--enable-webhooks=false",
				// The benchmark creates the runtime it measures with, as
				// for upstream, which installs none.
				"--install-default-runtimes=false",
				// No JobSet controller runs here to report on the JobSets:
				// past this timeout Torus would say so on each TrainJob (a
				// status write and a Warning per job), which a batch longer
				// than its default of 2 minutes reaches (N = 10,000).
				"--jobset-report-timeout=" + jobSetReportTimeout.String(),
				"--leader-election-namespace=" + nsSystem,
				// Outside a pod the operator is told its image, as
				// test/localcluster tells it.
				"--launch-image=" + benchLaunchImage,
				fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", p[0]),
				fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p[1]),
			}
			argv = append(argv, c.Flags...)
			if c.QPS > 0 {
				argv = append(argv, fmt.Sprintf("--kube-api-qps=%g", c.QPS), "--kube-api-burst="+strconv.Itoa(c.Burst))
			}
			if pprof {
				r.pprof = fmt.Sprintf("127.0.0.1:%d", p[2])
				argv = append(argv, "--pprof-bind-address="+r.pprof)
			}
			return supervisor.Spec{Argv: append(argv, extra...), Env: env}, nil
		}
	case kindUpstream:
		comp.Ports = 4 // health, metrics, webhook, status server
		// The status server runs only with the TrainJobStatus feature.
		comp.Optional = 1
		comp.Command = func(_ context.Context, p []int) (supervisor.Spec, error) {
			cfg, err := upstreamConfig(bins.upstreamConfig, c, p, dir)
			if err != nil {
				return supervisor.Spec{}, err
			}
			// Upstream reads its webhook certificate from
			// $TMPDIR/k8s-webhook-server/serving-certs (controller-runtime's
			// default); a private TMPDIR gives it one without touching /tmp.
			tmp := filepath.Join(dir, "upstream-tmp")
			if err := cp.ca.ServingCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs"), "trainer-webhook"); err != nil {
				return supervisor.Spec{}, err
			}
			return supervisor.Spec{
				Argv: []string{filepath.Join(bins.testbin, "trainer-controller-manager"), "--config=" + cfg},
				Env:  append(env, "TMPDIR="+tmp),
			}, nil
		}
	default:
		return nil, fmt.Errorf("contender %s: no controller to start", c.Name)
	}
	p, _, err := cp.sup.Run(ctx, comp)
	if err != nil {
		return nil, fmt.Errorf("%s not ready: %w", c.Name, err)
	}
	r.proc = p
	return r, nil
}

// upstreamConfig writes upstream's shipped Configuration for a loopback
// run; client QPS and burst change only for the equal-rate run.
// ports: health, metrics, webhook, status server.
func upstreamConfig(shipped string, c contender, ports []int, dir string) (string, error) {
	path := filepath.Join(dir, "upstream-config-"+c.Name+".yaml")
	return path, upstreamtrainer.WriteConfig(shipped, path, upstreamtrainer.Options{
		HealthPort: ports[0], MetricsPort: ports[1], WebhookPort: ports[2], StatusServerPort: ports[3],
		LeaderElectionNamespace: nsSystem,
		QPS:                     c.QPS, Burst: c.Burst,
	})
}

// fetchProfile saves a pprof profile from Torus's pprof endpoint.
func fetchProfile(ctx context.Context, addr, name, query, out string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+name+query, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s profile: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s profile: %s", name, resp.Status)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("saving %s profile: %w", name, err)
	}
	return nil
}
