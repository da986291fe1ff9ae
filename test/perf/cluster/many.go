package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// manyOptions is the many-jobs scenario: jobs of workers each, created at
// once.
type manyOptions struct {
	jobs, workers int32
	floor         bool
	// kubeconfig is the local cluster's, in the directory that keeps its
	// processes' PIDs.
	kubeconfig string
}

// parseMany reads JOBSxWORKERS, such as 1000x8.
func parseMany(s string) (manyOptions, error) {
	jobs, workers, ok := strings.Cut(strings.TrimSpace(s), "x")
	j, jerr := strconv.ParseInt(jobs, 10, 32)
	w, werr := strconv.ParseInt(workers, 10, 32)
	if !ok || jerr != nil || werr != nil || j < 1 || j > 10000 || w < 1 || w > int64(mpi.DefaultMaxNodes) {
		return manyOptions{}, fmt.Errorf("-many: %q is not JOBSxWORKERS, such as 1000x8 (1 to 10000 jobs of 1 to %d workers)", s, mpi.DefaultMaxNodes)
	}
	return manyOptions{jobs: int32(j), workers: int32(w)}, nil
}

// manyRun is one contender's figures for the whole burst.
type manyRun struct {
	results []result
	// all is from the first creation request to the last job with all its
	// pods Running.
	all     time.Duration
	work    operatorWork
	peakRSS int64
	// writes are the API server's, every component's, during the burst.
	writes counts
	// cpu is every cluster process's CPU time during the burst, in
	// seconds.
	cpu counts
	// resent is how many creations the API server refused for a
	// transient error and the burst sent again.
	resent int64
}

// runMany creates o.jobs TrainJobs of o.workers workers at once through the
// Kueue queue on the kwok nodes, times each from its own creation request
// to its JobSet, its admission, all its pods Running and its status saying
// so, then deletes them and does the same with their JobSets created
// directly (the floor), on empty nodes.
func runMany(ctx context.Context, c client.Client, cs kubernetes.Interface, w *watcher, meter *operatorMeter, ns string, k kwokContender, o manyOptions) error {
	// A burst this size is queued behind Kueue's admissions, the JobSet
	// controller and the scheduler on a small machine: the wait grows with
	// its pods (on 2 cores a burst of 9,000 pods ran about 6 a second).
	timeout := 5*time.Minute + time.Duration(o.jobs*(o.workers+1))*250*time.Millisecond
	names := make([]string, o.jobs)
	for i := range names {
		names[i] = fmt.Sprintf("m%04d", i)
	}
	before, err := meter.read(ctx)
	if err != nil {
		return err
	}
	writes, err := readServerWrites(ctx, cs)
	if err != nil {
		return err
	}
	cpu, err := clusterCPU(o.kubeconfig)
	if err != nil {
		return err
	}
	rss := sampleRSS(meter.pid)
	torus, err := burst(ctx, w, names, o.workers+1, timeout, func(n string) client.Object {
		return benchTrainJob(ns, n, k.runtime, o.workers, true)
	}, c)
	torus.peakRSS = rss.stop()
	if err != nil {
		return fmt.Errorf("Torus's jobs: %w", err)
	}
	if torus.writes, err = writesSince(ctx, cs, writes); err != nil {
		return err
	}
	if torus.cpu, err = cpuSince(o.kubeconfig, cpu); err != nil {
		return err
	}
	after, err := meter.read(ctx)
	if err != nil {
		return err
	}
	torus.work = after.minus(before)

	var floor *manyRun
	if o.floor {
		if floor, err = runManyFloor(ctx, c, cs, w, ns, names, timeout, o); err != nil {
			// Torus's figures stand without the floor's.
			printMany(ctx, c, o, torus, nil)
			return err
		}
	}
	printMany(ctx, c, o, torus, floor)
	return nil
}

// runManyFloor deletes Torus's jobs and runs the floor: their JobSets
// created directly, at once, on empty nodes.
func runManyFloor(ctx context.Context, c client.Client, cs kubernetes.Interface, w *watcher, ns string, names []string, timeout time.Duration, o manyOptions) (*manyRun, error) {
	var js jobsetv1alpha2.JobSet
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[0]}, &js); err != nil {
		return nil, err
	}
	if err := drainAll(ctx, c, ns, &trainer.TrainJobList{}, timeout); err != nil {
		return nil, err
	}
	floorNames := make([]string, len(names))
	for i := range names {
		floorNames[i] = "floor-" + names[i]
	}
	writes, err := readServerWrites(ctx, cs)
	if err != nil {
		return nil, err
	}
	cpu, err := clusterCPU(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	f, err := burst(ctx, w, floorNames, o.workers+1, timeout, func(n string) client.Object { return floorOf(&js, n) }, c)
	if err != nil {
		return nil, fmt.Errorf("the floor: %w", err)
	}
	if f.writes, err = writesSince(ctx, cs, writes); err != nil {
		return nil, err
	}
	if f.cpu, err = cpuSince(o.kubeconfig, cpu); err != nil {
		return nil, err
	}
	return &f, nil
}

// burst creates one object per name at once, each timed from its own
// creation request, and waits until every job has all its pods Running. A
// creation the API server refuses for a transient error (a webhook that
// did not answer in time: JobSet's, under a thousand creations on 2 cores)
// is sent again, as a controller would, within the job's own time.
func burst(ctx context.Context, w *watcher, names []string, pods int32, timeout time.Duration, object func(string) client.Object, c client.Client) (manyRun, error) {
	w.expect(names, pods)
	start := time.Now()
	var wg sync.WaitGroup
	var resent atomic.Int64
	errs := make(chan error, len(names))
	for _, n := range names {
		obj := object(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.started(n, time.Now())
			if err := createRetrying(ctx, c, obj, &resent); err != nil {
				errs <- fmt.Errorf("creating %s: %w", n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return manyRun{}, err
	}
	res, err := w.wait(ctx, names, timeout)
	if err != nil {
		return manyRun{}, err
	}
	return manyRun{results: res, all: time.Since(start), resent: resent.Load()}, nil
}

// createRetrying creates obj, sending it again while the API server
// refuses it for a transient error, and counts each resend. An object that
// exists on a resend was created by an attempt whose answer was lost.
func createRetrying(ctx context.Context, c client.Client, obj client.Object, resent *atomic.Int64) error {
	first := true
	return retry.OnError(createBackoff, transient, func() error {
		if !first {
			resent.Add(1)
		}
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object))
		if !first && apierrors.IsAlreadyExists(err) {
			return nil
		}
		first = false
		return err
	})
}

// createBackoff spaces a burst's resent creations: 3 to 6 minutes in
// all, so that a thousand do not come back at once.
var createBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 1, Steps: 9, Cap: time.Minute}

// transient reports whether the API server may accept the same request
// later: an admission webhook it could not call, a timeout, a throttle.
func transient(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
}

// drainAll deletes every object of list's kind in the namespace, each on
// its own (a collection's delete of a thousand TrainJobs outlasts the API
// server's request timeout on a busy machine), and waits until the
// namespace has no pod.
func drainAll(ctx context.Context, c client.Client, ns string, list client.ObjectList, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing the burst's jobs: %w", err)
	}
	objs, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, o := range objs {
		obj := o.(client.Object)
		g.Go(func() error {
			if err := c.Delete(gctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting %s: %w", obj.GetName(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("deleting the burst's jobs: %w", err)
	}
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("waiting %s for the burst's pods to go: %w", timeout, err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting %s for the burst's pods to go: %d left", timeout, len(pods.Items))
		case <-time.After(time.Second):
		}
	}
}

// printMany writes the scenario's report in Markdown.
func printMany(ctx context.Context, c client.Client, o manyOptions, torus manyRun, floor *manyRun) {
	fmt.Println("# Many jobs at once")
	fmt.Println()
	then := "then the floor: their JobSets created directly through the same queue, at once, on empty nodes, each with its own headless Service as JobSet gives it"
	if floor == nil {
		then = "the floor (their JobSets created directly) was not run"
	}
	fmt.Printf("`make bench-many` (MANY=%dx%d) on %d cores, %s. %d TrainJobs of %d workers (%d pods) created at once through Kueue on %s, "+
		"each timed from its own creation request; %s. "+
		"Status lag is from the moment the benchmark's watch saw a job's last pod Running to the moment it saw the TrainJob's status say Running. "+
		"The operator's figures are its whole process during Torus's burst.\n\n",
		o.jobs, o.workers, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"), o.jobs, o.workers, o.jobs*(o.workers+1), kwokNodesSummary(ctx, c), then)
	fmt.Printf("%s\n\n", kueueSettings(o.kubeconfig))
	fmt.Println("| | creation → JobSet p50 / p99 | creation → admitted p50 / p99 | creation → all pods Running p50 / p99 / max | first creation → every job Running | status lag p50 / p99 |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	row := func(label string, r manyRun, torus bool) {
		n := len(r.results)
		js, adm, run, lag := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
		for i, x := range r.results {
			js[i], adm[i], run[i], lag[i] = x.jobSet, x.admitted, x.running, max(x.status-x.running, 0)
		}
		two := func(d []time.Duration) string {
			return fmt.Sprintf("%.1f / %.1f s", pct(d, 50).Seconds(), pct(d, 99).Seconds())
		}
		jsCol, admCol, lagCol := two(js), two(adm), two(lag)
		if !torus {
			// The floor creates its JobSets, and only its pods show
			// Kueue's admission here.
			jsCol, admCol, lagCol = "—", "—", "—"
		}
		fmt.Printf("| %s | %s | %s | %.1f / %.1f / %.1f s | %.1f s | %s |\n", label, jsCol, admCol,
			pct(run, 50).Seconds(), pct(run, 99).Seconds(), pct(run, 100).Seconds(), r.all.Seconds(), lagCol)
	}
	row("Torus", torus, true)
	if floor != nil {
		row("floor", *floor, false)
	}
	for _, r := range []struct {
		label string
		run   *manyRun
	}{{"Torus's", &torus}, {"The floor's", floor}} {
		if r.run != nil && r.run.resent > 0 {
			fmt.Printf("\n%s burst: the API server refused %d creations for a transient error (a webhook it could not call in time); each was sent again, within its job's own time.\n", r.label, r.run.resent)
		}
	}
	if floor != nil {
		fmt.Printf("\nRatio of the time to every job Running, Torus to the floor: %.2f.\n", torus.all.Seconds()/floor.all.Seconds())
		fmt.Printf("\nThe API server's writes, every component's, during each burst: Torus's %.0f (%s); the floor's %.0f (%s).\n",
			torus.writes.total(), torus.writes, floor.writes.total(), floor.writes)
		fmt.Printf("\nThe cluster's CPU during each burst, in seconds: Torus's %.0f (%s); the floor's %.0f (%s).\n",
			torus.cpu.total(), torus.cpu, floor.cpu.total(), floor.cpu)
	} else {
		fmt.Printf("\nThe API server's writes, every component's, during the burst: %.0f (%s).\n", torus.writes.total(), torus.writes)
		fmt.Printf("\nThe cluster's CPU during the burst, in seconds: %.0f (%s).\n", torus.cpu.total(), torus.cpu)
	}
	fmt.Printf("\nThe operator during Torus's burst: resident memory peak %.0f MiB (sampled every 200 ms), CPU %.1f s, %.0f API requests (%s), %.0f TrainJob reconciles.\n",
		float64(torus.peakRSS)/(1<<20), torus.work.cpu.Seconds(), torus.work.requests, torus.work.byMethod, torus.work.reconciles)
}

// kueueSettings says how the local cluster's Kueue was configured for the
// burst: how many JobSets and Workloads it reconciles at once, and how long
// a job's pods have to all run before it is evicted.
func kueueSettings(kubeconfig string) string {
	file := filepath.Join(filepath.Dir(kubeconfig), "config", "kueue.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("Kueue's configuration could not be read: %v.", err)
	}
	var cfg kueueconfig.Configuration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Sprintf("Kueue's configuration (%s) could not be read: %v.", file, err)
	}
	at := func(kind string) int {
		if cfg.Controller == nil || cfg.Controller.GroupKindConcurrency[kind] == 0 {
			return 1 // controller-runtime's default
		}
		return cfg.Controller.GroupKindConcurrency[kind]
	}
	ready := "none"
	if cfg.WaitForPodsReady != nil {
		ready = cfg.WaitForPodsReady.Timeout.Duration.String()
	}
	return fmt.Sprintf("Kueue reconciles JobSets %d and Workloads %d at a time (`controller.groupKindConcurrency`); its PodsReady timeout is %s.",
		at("JobSet.jobset.x-k8s.io"), at("Workload.kueue.x-k8s.io"), ready)
}
