package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// mpiOperatorModule is Kubeflow's mpi-operator, pinned in
// hack/testbin/mpioperator and built by hack/testbin/build.sh mpi-operator.
const mpiOperatorModule = "github.com/kubeflow/mpi-operator"

// mpiJobGVK is the kind mpi-operator v0.8 reconciles.
var mpiJobGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v2beta1", Kind: "MPIJob"}

// mpiJobNameLabel is the label mpi-operator gives each pod of an MPIJob:
// the job's name.
const mpiJobNameLabel = "training.kubeflow.org/job-name"

// mpiCase is one scenario of the side-by-side: jobs created at once, of
// workers each.
type mpiCase struct{ jobs, workers int32 }

func (m mpiCase) String() string {
	if m.jobs == 1 {
		return fmt.Sprintf("one job of %d workers", m.workers)
	}
	return fmt.Sprintf("%d jobs of %d workers", m.jobs, m.workers)
}

// mpiOperatorOptions is the side-by-side with mpi-operator: its cases, the
// binary to run with its flags beyond the benchmark's, and whether both
// contenders' jobs go through Kueue.
type mpiOperatorOptions struct {
	cases  []mpiCase
	bin    string
	args   []string
	queued bool
}

// parseMPICases reads the side-by-side's cases, comma-separated: N for one
// job of N workers, JOBSxWORKERS for that many jobs at once.
func parseMPICases(s string) ([]mpiCase, error) {
	var out []mpiCase
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if strings.Contains(f, "x") {
			o, err := parseMany(f)
			if err != nil {
				return nil, fmt.Errorf("-mpi-operator: %q is not JOBSxWORKERS, such as 200x8", f)
			}
			out = append(out, mpiCase{jobs: o.jobs, workers: o.workers})
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 1 || n > int64(mpi.DefaultMaxNodes) {
			return nil, fmt.Errorf("-mpi-operator: %q is neither a worker count from 1 to %d nor JOBSxWORKERS", f, mpi.DefaultMaxNodes)
		}
		out = append(out, mpiCase{jobs: 1, workers: int32(n)})
	}
	return out, nil
}

// controllerRun is one contender's figures for a case.
type controllerRun struct {
	manyRun
	cpu      time.Duration
	requests counts
}

// runVsMPIOperator runs each case twice on the kwok nodes, both through
// Kueue's queue or neither: as Torus's TrainJobs, then as the same jobs'
// MPIJobs with mpi-operator running, each from the first creation request
// until every job has all its pods Running, with each controller's CPU,
// peak memory and API requests. mpi-operator runs only for its own jobs,
// started for each case and proven by a job of one worker first.
func runVsMPIOperator(ctx context.Context, c client.Client, cfg *rest.Config, w *watcher, meter *operatorMeter, ns string, k kwokContender, o mpiOperatorOptions) error {
	if err := installMPIJobCRD(ctx, c); err != nil {
		return err
	}
	version, err := mpiOperatorVersion()
	if err != nil {
		return err
	}
	image, err := runtimeImage(ctx, c, k.runtime)
	if err != nil {
		return err
	}
	queueing := "neither through Kueue"
	if o.queued {
		queueing = "both through the same Kueue queue (Kueue's JobSet and MPIJob integrations)"
	}
	flags := "its other flags its defaults"
	if len(o.args) > 0 {
		flags = "and " + strings.Join(o.args, " ")
	}
	fmt.Println("# Side by side with mpi-operator")
	fmt.Println()
	fmt.Printf("`make bench-mpi-operator` (MPI_OPERATOR=%s) on %d cores, %s, on %s. Each case runs as Torus's TrainJobs, then as MPIJobs "+
		"of the same shape (a launcher and the workers, each worker asking for 100m of CPU; the launcher created once the workers are Ready, "+
		"as Torus's is on nodes that run no containers) with Kubeflow's mpi-operator %s "+
		"(built from its Go module, its client at Torus's operator's limits, 500 requests per second and a burst of 1,000, %s), "+
		"on empty nodes, %s. Each is timed from its first creation request until every job has all its pods Running. "+
		"The controllers' figures are their whole process during the case: resident memory sampled every 200 ms, CPU time, and their API requests by method "+
		"(Torus's from its metrics, mpi-operator's counted by a proxy in front of it).\n\n",
		casesString(o.cases), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"), kwokNodesSummary(ctx, c), version, flags, queueing)
	fmt.Println("| case | controller | first creation → every job Running | per job: all pods Running p50 / p99 | controller RSS peak | controller CPU | controller API requests |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	for i, cs := range o.cases {
		timeout := 5*time.Minute + time.Duration(cs.jobs*(cs.workers+1))*100*time.Millisecond
		names := func(prefix string) []string {
			out := make([]string, cs.jobs)
			for j := range out {
				out[j] = fmt.Sprintf("%s%d-%04d", prefix, i, j)
			}
			return out
		}

		before, err := meter.read(ctx)
		if err != nil {
			return err
		}
		rss := sampleRSS(meter.pid)
		run, err := burst(ctx, w, names("t"), cs.workers+1, timeout, func(n string) client.Object {
			return benchTrainJob(ns, n, k.runtime, cs.workers, o.queued)
		}, c)
		peak := rss.stop()
		if err != nil {
			return fmt.Errorf("%s, Torus: %w", cs, err)
		}
		after, err := meter.read(ctx)
		if err != nil {
			return err
		}
		work := after.minus(before)
		torus := controllerRun{manyRun: run, cpu: work.cpu, requests: work.byMethod}
		torus.peakRSS = peak
		if err := drainAll(ctx, c, ns, &trainer.TrainJobList{}, timeout); err != nil {
			return err
		}

		printControllerRow(cs, "Torus", torus)

		op, err := startMPIOperator(ctx, c, cfg, o, ns, image, w)
		if err != nil {
			return err
		}
		theirs, err := op.measure(ctx, c, w, ns, names("m"), cs.workers, timeout)
		var late *waitTimeout
		if errors.As(err, &late) {
			// A contender that does not start its jobs in time is a
			// result: the row says how far it got.
			fmt.Printf("| %s | mpi-operator %s | not within %s: %d of %d jobs with all pods Running | | | | |\n", cs, version, late.after, late.running, late.jobs)
			err = nil
		}
		if stopErr := op.stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return fmt.Errorf("%s, mpi-operator: %w", cs, err)
		}
		if err := drainAll(ctx, c, ns, mpiJobList(), timeout); err != nil {
			return err
		}
		if late != nil {
			continue
		}
		printControllerRow(cs, "mpi-operator "+version, theirs)
		fmt.Printf("| %s | ratio, mpi-operator to Torus | %.2f | | %.2f | %.2f | %.2f |\n", cs, theirs.all.Seconds()/torus.all.Seconds(),
			float64(theirs.peakRSS)/float64(torus.peakRSS), theirs.cpu.Seconds()/torus.cpu.Seconds(), theirs.requests.total()/torus.requests.total())
	}
	return nil
}

// printControllerRow writes one contender's row of a case.
func printControllerRow(cs mpiCase, label string, r controllerRun) {
	times := make([]time.Duration, len(r.results))
	for j, x := range r.results {
		times[j] = x.running
	}
	fmt.Printf("| %s | %s | %.1f s | %.1f / %.1f s | %.0f MiB | %.1f s | %.0f (%s) |\n", cs, label, r.all.Seconds(),
		pct(times, 50).Seconds(), pct(times, 99).Seconds(), float64(r.peakRSS)/(1<<20), r.cpu.Seconds(),
		r.requests.total(), r.requests)
}

func casesString(cases []mpiCase) string {
	parts := make([]string, len(cases))
	for i, cs := range cases {
		parts[i] = strconv.Itoa(int(cs.workers))
		if cs.jobs > 1 {
			parts[i] = fmt.Sprintf("%dx%d", cs.jobs, cs.workers)
		}
	}
	return strings.Join(parts, ",")
}

// runtimeImage is the image of a runtime's workers: the MPIJobs' pods run
// it too.
func runtimeImage(ctx context.Context, c client.Client, name string) (string, error) {
	var rt trainer.ClusterTrainingRuntime
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &rt); err != nil {
		return "", err
	}
	for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rj.Name == mpi.NodeJob && len(rj.Template.Spec.Template.Spec.Containers) > 0 {
			return rj.Template.Spec.Template.Spec.Containers[0].Image, nil
		}
	}
	return "", fmt.Errorf("runtime %s has no %s job with a container", name, mpi.NodeJob)
}

// mpiOperatorDir is where the pinned mpi-operator module is unpacked.
func mpiOperatorDir() (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	return repo.ModuleDir(mpiOperatorModule, filepath.Join(root, "hack", "testbin", "mpioperator"))
}

func mpiOperatorVersion() (string, error) {
	dir, err := mpiOperatorDir()
	if err != nil {
		return "", err
	}
	_, v, ok := strings.Cut(filepath.Base(dir), "@")
	if !ok {
		return "", fmt.Errorf("%s names no version", dir)
	}
	return v, nil
}

// installMPIJobCRD creates the MPIJob CRD the pinned module ships and waits
// until the API server serves it.
func installMPIJobCRD(ctx context.Context, c client.Client) error {
	dir, err := mpiOperatorDir()
	if err != nil {
		return err
	}
	objs, err := repo.ReadObjects(filepath.Join(dir, "manifests", "base", "kubeflow.org_mpijobs.yaml"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, o)); err != nil {
			return fmt.Errorf("creating the MPIJob CRD: %w", err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		err := c.Get(ctx, client.ObjectKey{Name: "mpijobs.kubeflow.org"}, crd)
		if err == nil && crdEstablished(crd) {
			// The client's mapper must know the kind before the first
			// MPIJob is created.
			if _, err = c.RESTMapper().RESTMapping(mpiJobGVK.GroupKind(), mpiJobGVK.Version); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the MPIJob CRD was not served within a minute (%v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// crdEstablished says whether a CRD's Established condition is True.
func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == string(apiextensionsv1.Established) && m["status"] == string(apiextensionsv1.ConditionTrue) {
			return true
		}
	}
	return false
}

// mpiJobList is a list of MPIJobs, a kind the client reads unstructured.
func mpiJobList() client.ObjectList {
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(mpiJobGVK.GroupVersion().WithKind(mpiJobGVK.Kind + "List"))
	return u
}

// mpiJob is an MPIJob of the same shape as the benchmark's TrainJobs on
// the kwok nodes: a launcher and workers of one slot each, each worker
// asking for 100m of CPU, the launcher created once the workers are Ready,
// the pods running until deleted; queued in the benchmark's Kueue queue when
// queued.
func mpiJob(ns, name, image string, workers int32, queued bool) *unstructured.Unstructured {
	pod := func(cpu string) map[string]any {
		ctr := map[string]any{"name": "mpi", "image": image, "command": []any{"sleep", "infinity"}}
		if cpu != "" {
			ctr["resources"] = map[string]any{"requests": map[string]any{"cpu": cpu}}
		}
		return map[string]any{"spec": map[string]any{"containers": []any{ctr}}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"slotsPerWorker": int64(1),
			// On kwok, which runs no containers, Torus's launcher starts
			// once its workers are Ready (the local cluster's operator
			// runs with --launcher-after-workers): mpi-operator's own
			// setting for the same order.
			"launcherCreationPolicy": "WaitForWorkersReady",
			"mpiReplicaSpecs": map[string]any{
				"Launcher": map[string]any{"replicas": int64(1), "template": pod("")},
				"Worker":   map[string]any{"replicas": int64(workers), "template": pod("100m")},
			},
		},
	}}
	u.SetGroupVersionKind(mpiJobGVK)
	if queued {
		u.SetLabels(map[string]string{mpi.KueueQueueLabel: "bench"})
	}
	return u
}

// mpiOperator is a running mpi-operator and the proxy that counts its
// requests.
type mpiOperator struct {
	cmd   *exec.Cmd
	proxy *countingProxy
	dir   string
	// image is the pods' image: the benchmark runtime's.
	image string
	// queued: its jobs go through Kueue's queue.
	queued bool
}

// startMPIOperator runs mpi-operator against the cluster through a counting
// proxy, with its logs in a file, and returns once it ran a job of one
// worker to all its pods Running, through Kueue when o.queued.
func startMPIOperator(ctx context.Context, c client.Client, cfg *rest.Config, o mpiOperatorOptions, ns, image string, w *watcher) (*mpiOperator, error) {
	// Its leader election's lock lives in this namespace.
	const lockNS = "mpi-operator"
	if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lockNS}})); err != nil {
		return nil, err
	}
	proxy, err := newCountingProxy(cfg)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-mpi-operator-")
	if err != nil {
		proxy.close()
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "%s"}}]
contexts: [{name: local, context: {cluster: local, user: proxy}}]
users: [{name: proxy, user: {}}]
current-context: local
`, proxy.url)), 0o600); err != nil {
		proxy.close()
		return nil, err
	}
	logs, err := os.Create(filepath.Join(dir, "mpi-operator.log"))
	if err != nil {
		proxy.close()
		return nil, err
	}
	args := append([]string{"--kubeConfig", kubeconfig, "--lock-namespace", lockNS, "--kube-api-qps", "500", "--kube-api-burst", "1000"}, o.args...)
	cmd := exec.Command(o.bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	// A process group of its own, stopped by its PID.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		proxy.close()
		return nil, fmt.Errorf("starting %s (hack/testbin/build.sh mpi-operator builds it): %w", o.bin, err)
	}
	_ = logs.Close()
	op := &mpiOperator{cmd: cmd, proxy: proxy, dir: dir, image: image, queued: o.queued}
	name := "mpi-operator-ready"
	// Kueue sets its MPIJob integration up once it sees the CRD, polling
	// for it with a back-off of up to 2 minutes.
	wait := 2 * time.Minute
	if o.queued {
		wait = 5 * time.Minute
	}
	if _, err := burst(ctx, w, []string{name}, 2, wait, func(n string) client.Object { return mpiJob(ns, n, image, 1, o.queued) }, c); err != nil {
		_ = op.stop()
		return nil, fmt.Errorf("mpi-operator did not run a job of one worker (its log: %s): %w", logs.Name(), err)
	}
	if o.queued {
		if err := admittedByKueue(ctx, c, ns, name); err != nil {
			_ = op.stop()
			return nil, err
		}
	}
	if err := drainAll(ctx, c, ns, mpiJobList(), 2*time.Minute); err != nil {
		_ = op.stop()
		return nil, err
	}
	return op, nil
}

// admittedByKueue checks that Kueue admitted the MPIJob name, which ran:
// without its MPIJob integration, Kueue lets a queued MPIJob run unqueued.
// One read suffices: Kueue writes the admission before it resumes the job,
// and the job's pods ran.
func admittedByKueue(ctx context.Context, c client.Client, ns, name string) error {
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing Kueue's workloads: %w", err)
	}
	for _, wl := range wls.Items {
		for _, ref := range wl.OwnerReferences {
			if ref.APIVersion == mpiJobGVK.GroupVersion().String() && ref.Kind == mpiJobGVK.Kind && ref.Name == name && wl.Status.Admission != nil {
				return nil
			}
		}
	}
	return fmt.Errorf("MPIJob %s ran without an admitted Kueue workload: Kueue does not manage MPIJobs here; start the cluster with test/localcluster up -kueue-mpijob, or measure with -queue=false", name)
}

// measure creates the MPIJobs at once and times them, with mpi-operator's
// work meanwhile.
func (op *mpiOperator) measure(ctx context.Context, c client.Client, w *watcher, ns string, names []string, workers int32, timeout time.Duration) (controllerRun, error) {
	pid := op.cmd.Process.Pid
	cpuBefore, err := processCPU(pid)
	if err != nil {
		return controllerRun{}, err
	}
	reqBefore := op.proxy.requests()
	rss := sampleRSS(pid)
	run, err := burst(ctx, w, names, workers+1, timeout, func(n string) client.Object { return mpiJob(ns, n, op.image, workers, op.queued) }, c)
	peak := rss.stop()
	if err != nil {
		return controllerRun{}, err
	}
	cpuAfter, err := processCPU(pid)
	if err != nil {
		return controllerRun{}, err
	}
	reqs := op.proxy.requests().minus(reqBefore)
	out := controllerRun{manyRun: run, cpu: cpuAfter - cpuBefore, requests: reqs}
	out.peakRSS = peak
	return out, nil
}

// stop ends mpi-operator by its PID and closes the proxy.
func (op *mpiOperator) stop() error {
	defer op.proxy.close()
	if err := syscall.Kill(-op.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping mpi-operator (PID %d): %w", op.cmd.Process.Pid, err)
	}
	_ = op.cmd.Wait()
	return os.RemoveAll(op.dir)
}

// countingProxy serves the API server on loopback without TLS or
// credentials, forwarding with the benchmark's own, and counts the
// requests by method: a controller pointed at it shows what it asks of the
// API server, as the operator's rest_client_requests_total does.
type countingProxy struct {
	url    string
	server *http.Server

	mu       sync.Mutex
	byMethod map[string]float64
}

func newCountingProxy(cfg *rest.Config) (*countingProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{url: "http://" + ln.Addr().String(), byMethod: map[string]float64{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	// Watches stream: each event is passed on as it comes.
	rp.FlushInterval = -1
	// A watch cut when the controller stops is no error of the benchmark.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			p.byMethod[r.Method]++
			p.mu.Unlock()
			rp.ServeHTTP(rw, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

// requests are the requests counted so far, by method.
func (p *countingProxy) requests() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(counts, len(p.byMethod))
	for m, n := range p.byMethod {
		out[m] = n
	}
	return out
}

func (p *countingProxy) close() {
	// Its client's watches never end on their own.
	_ = p.server.Close()
}
