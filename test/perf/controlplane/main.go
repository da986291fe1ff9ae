// Command bench measures the Torus operator against the upstream Kubeflow
// Trainer controller (v2.3.0) side by side, on the same machine in one run:
// for N MPI TrainJobs of 8 workers on an OpenMPI runtime both understand,
// the time until every job has its objects (JobSet and Secret for Torus,
// which carries the hostfile in the Secret; JobSet, SSH Secret and hostfile
// ConfigMap for upstream), the API writes each controller sends per job (counted by a
// proxy in front of the API server), its writes per minute at rest, and its
// peak RSS and CPU seconds, its API server's CPU seconds; the time one job
// of 16,384 workers takes to get its JobSet; and, with the largest batch in
// the cluster, the plugin's list, describe and wait. The floor is the
// benchmark itself creating the TrainJob, JobSet, Secret and ConfigMap
// directly, with no controller; the two-object floor (floor2, not run by
// default) leaves out the ConfigMap, as Torus does.
//
// Each contender runs alone on a fresh etcd and kube-apiserver (Trainer,
// JobSet and Torus CRDs; no JobSet controller, no admission webhooks), three
// times at each N, so that each ratio comes with its spread. With -paired,
// two contenders stand ready at once and take turns creating the batch in
// chunks, so that the machine's drift between minutes falls on both.
//
//	go run ./test/perf/controlplane                 # N = 100, 500, 1000, 10000, 3 runs; writes test/perf/results.md
//	go run ./test/perf/controlplane -quick          # N = 100 only, defaults only, 1 run; prints, writes nothing
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/operator/metacreate"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
	"github.com/torus-mpi/torus/test/localcluster/upstreamtrainer"
)

type options struct {
	sizes       []int
	workers     int32
	bigWorkers  int32
	contenders  []contender
	steady      time.Duration
	timeout     time.Duration
	concurrency int
	testbin     string
	operator    string
	out         string
	work        string
	keep        bool
	build       bool
	pprofDir    string
	pprofSecs   int
	torusFlags  []string
	runs        int
	// chunk, when above 0, runs two contenders side by side in chunks of
	// this many jobs (measurePaired).
	chunk     int
	placement placement
}

func main() {
	// The API server's warnings about the objects the benchmark makes at
	// their worst (finalizer names and the like) are expected.
	crlog.SetLogger(logr.Discard())
	var o options
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	quick := fs.Bool("quick", false, "N=100 only, each contender at its defaults, a 20s rest window; writes no results file")
	sizes := fs.String("n", "100,500,1000,10000", "numbers of TrainJobs, comma-separated")
	names := fs.String("contenders", "", "contenders to run, comma-separated (default: all but floor2 and floor2-behind): floor,floor2,floor2-behind,torus,upstream,upstream-qps500,torus-qps50,torus-no-event-watch")
	w := fs.Int("workers", 8, "workers (numNodes) per TrainJob")
	big := fs.Int("big-workers", int(mpi.DefaultMaxNodes), "workers of the single large TrainJob (default: the operator's default --max-nodes); 0 skips it")
	fs.DurationVar(&o.steady, "steady", time.Minute, "window over which writes at rest are counted")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "longest wait for one batch")
	fs.IntVar(&o.runs, "runs", 3, "runs of every contender at each N, interleaved, every other run in reverse order; ratios are reported as the median with every run's value")
	fs.IntVar(&o.chunk, "paired", 0, "with two contenders: both stand ready at once and take turns creating chunks of this many TrainJobs (A B, B A, ...), so that a drift of the machine's speed falls on both alike; 0 runs each contender's whole batch in turn")
	fs.BoolVar(&o.placement.split, "split-cores", false, "etcd and kube-apiserver on CPU 0, the controller and the benchmark on CPU 1, as on a cluster whose control plane has machines of its own")
	fs.IntVar(&o.concurrency, "concurrency", 32, "goroutines creating TrainJobs (and, for the floor, their objects)")
	testbin := ".testbin/bin"
	if dir := os.Getenv("TESTBIN"); dir != "" {
		testbin = filepath.Join(dir, "bin")
	}
	fs.StringVar(&o.testbin, "testbin", testbin, "directory of etcd, kube-apiserver and trainer-controller-manager (default $TESTBIN/bin)")
	fs.StringVar(&o.operator, "operator", "", "torus-operator binary (default: built from this tree into the work directory)")
	fs.StringVar(&o.out, "out", "test/perf/results.md", "results file; empty writes none")
	fs.StringVar(&o.work, "work", "", "work directory: logs, certificates, etcd data (default: a temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (its logs) afterwards")
	fs.BoolVar(&o.build, "build", true, "build etcd, kube-apiserver and upstream's trainer-controller-manager (hack/testbin/build.sh) and the operator first")
	fs.StringVar(&o.pprofDir, "pprof", "", "directory for Torus's CPU, heap and allocation profiles at the largest N (enables --pprof-bind-address); with -paired, CPU profiles of each chunk's API server and Torus")
	fs.IntVar(&o.pprofSecs, "pprof-seconds", 30, "length of the CPU profiles, from the start of the batch (or chunk)")
	torusFlags := fs.String("torus-flags", "", "extra operator flags, space-separated, for experiments (results then are not its defaults)")
	tenants := fs.Bool("tenants", false, "instead: what one tenant's objects cost the operator (a flood of labelled ConfigMaps and Secrets, one job's pods at each -pods); writes tenants.md beside -out")
	podSizes := fs.String("pods", "1000,4000,16384", "with -tenants: numbers of pods of one job, comma-separated")
	dashboard := fs.Bool("dashboard", false, "instead: how soon kubectl mpi dashboard shows a new job and a state change in headless Chromium, with -dashboard-jobs jobs in the namespace; writes dashboard.md beside -out")
	dashboardJobs := fs.String("dashboard-jobs", "10,1000", "with -dashboard: numbers of jobs already in the namespace, comma-separated, ascending")
	samples := fs.Int("samples", 20, "with -dashboard: changes measured at each size")
	_ = fs.Parse(os.Args[1:])
	if err := o.placement.pinSelf(); err != nil {
		fatal(err)
	}
	if *dashboard {
		var sizes []int
		for _, s := range strings.Split(*dashboardJobs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 0 {
				fatal(fmt.Errorf("bad -dashboard-jobs %q", s))
			}
			sizes = append(sizes, n)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		done, err := enterWork(&o)
		if err == nil {
			err = runDashboard(ctx, o, sizes, *samples)
			done(err)
		}
		if err != nil {
			fatal(err)
		}
		return
	}
	if *tenants {
		var sizes []int
		for _, s := range strings.Split(*podSizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				fatal(fmt.Errorf("bad -pods %q", s))
			}
			sizes = append(sizes, n)
		}
		o.torusFlags = strings.Fields(*torusFlags)
		o.workers = int32(*w)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := runTenantsIn(ctx, o, sizes); err != nil {
			fatal(err)
		}
		return
	}
	o.workers, o.bigWorkers = int32(*w), int32(*big)
	o.torusFlags = strings.Fields(*torusFlags)
	if *quick {
		if !isFlagSet(fs, "n") {
			*sizes = "100"
		}
		if !isFlagSet(fs, "runs") {
			o.runs = 1
		}
		if !isFlagSet(fs, "steady") {
			o.steady = 20 * time.Second
		}
		if *names == "" {
			*names = "floor,torus,upstream"
		}
		if !isFlagSet(fs, "out") {
			o.out = ""
		}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad -n %q", s))
		}
		o.sizes = append(o.sizes, n)
	}
	if o.runs < 1 {
		fatal(fmt.Errorf("bad -runs %d", o.runs))
	}
	if *names == "" {
		for _, c := range allContenders {
			if !c.OnRequest {
				o.contenders = append(o.contenders, c)
			}
		}
	} else {
		for _, n := range strings.Split(*names, ",") {
			found := false
			for _, c := range allContenders {
				if c.Name == strings.TrimSpace(n) {
					o.contenders = append(o.contenders, c)
					found = true
				}
			}
			if !found {
				fatal(fmt.Errorf("unknown contender %q", n))
			}
		}
	}
	if o.chunk < 0 || o.chunk > 0 && len(o.contenders) != 2 {
		fatal(fmt.Errorf("-paired takes a chunk size above 0 and exactly two -contenders"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, *quick); err != nil {
		fatal(err)
	}
}

// runOrder is the order the contenders run in a round: as given in odd
// rounds and reversed in even ones, so that neither is always the one that
// runs first on a machine whose speed drifts.
func runOrder(cs []contender, run int) []contender {
	if run%2 == 1 {
		return cs
	}
	out := slices.Clone(cs)
	slices.Reverse(out)
	return out
}

func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Printf("bench: "+time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

// enterWork runs from the repository's root with absolute paths: the
// binaries' directory, and the work directory (a new temporary one unless
// given). done removes the work directory unless it is to be kept or the
// run failed.
func enterWork(o *options) (done func(error), err error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	if err := os.Chdir(root); err != nil {
		return nil, err
	}
	if o.testbin, err = filepath.Abs(o.testbin); err != nil {
		return nil, err
	}
	if o.work == "" {
		if o.work, err = os.MkdirTemp("", "torus-bench-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(o.work, 0o755); err != nil {
		return nil, err
	}
	if o.work, err = filepath.Abs(o.work); err != nil {
		return nil, err
	}
	work, keep := o.work, o.keep
	return func(err error) {
		if keep || err != nil {
			logf("logs kept in %s", work)
			return
		}
		_ = os.RemoveAll(work)
	}, nil
}

func run(ctx context.Context, o options, quick bool) (err error) {
	done, err := enterWork(&o)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	if err := os.MkdirAll(filepath.Join(o.work, "logs"), 0o755); err != nil {
		return err
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return err
		}
	}
	bins, crds, err := prepare(o)
	if err != nil {
		return err
	}
	m := describeMachine()
	logf("%s; load average %s", m.CPU, m.LoadStart)

	rep := &report{machine: m, opts: o}
	largest := 0
	for _, n := range o.sizes {
		largest = max(largest, n)
	}
	smallest := largest
	for _, n := range o.sizes {
		smallest = min(smallest, n)
	}
	// keep records a run's results; a long invocation keeps what it
	// measured so far.
	keep := func(rs ...*result) error {
		for _, r := range rs {
			rep.results = append(rep.results, r)
			logf("%s", r.summary())
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if o.out != "" && o.runs > 1 {
			return rep.write(o.out, quick, true)
		}
		return nil
	}
	// N outermost, then the run: every contender's run at one N is close
	// in time to the others' of the same round, so a change of the
	// machine's load hits them alike.
	for _, n := range o.sizes {
		for run := 1; run <= o.runs; run++ {
			if o.chunk > 0 {
				if err := keep(measurePaired(ctx, o, bins, crds, runOrder(o.contenders, run), n, run)...); err != nil {
					return err
				}
				continue
			}
			for _, c := range runOrder(o.contenders, run) {
				if !c.runsAt(n, o.sizes) {
					continue
				}
				if err := keep(measureOne(ctx, o, bins, crds, c, n, run, n == largest, n == smallest)); err != nil {
					return err
				}
			}
		}
	}
	text := rep.finish(quick)
	fmt.Println()
	fmt.Print(text)
	if o.out != "" {
		if err := rep.write(o.out, quick, false); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	if rep.failed() {
		return errors.New("some runs failed; see the table and the logs")
	}
	return nil
}

// prepare builds what is missing and finds the CRDs and upstream's shipped
// configuration in the pinned modules.
func prepare(o options) (binaries, crdSources, error) {
	var bins binaries
	var crds crdSources
	bins.testbin = o.testbin
	if o.build {
		logf("building etcd, kube-apiserver, kubectl and trainer-controller-manager (cached after the first time)")
		cmd := exec.Command("hack/testbin/build.sh", "etcd", "kube-apiserver", "kubectl", "trainer")
		cmd.Env = append(os.Environ(), "TESTBIN="+filepath.Dir(o.testbin))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return bins, crds, fmt.Errorf("hack/testbin/build.sh: %w", err)
		}
	}
	bins.operator = o.operator
	if bins.operator == "" {
		bins.operator = filepath.Join(o.work, "torus-operator")
		logf("building the Torus operator from this tree")
		if err := goBuild(bins.operator, "./operator/cmd/torus-operator"); err != nil {
			return bins, crds, fmt.Errorf("building the operator: %w", err)
		}
	}
	// The plugin, for the listing measure.
	bins.plugin = filepath.Join(o.work, "kubectl-mpi")
	if err := goBuild(bins.plugin, "./plugin/cmd/kubectl-mpi"); err != nil {
		return bins, crds, fmt.Errorf("building the plugin: %w", err)
	}
	for _, b := range []string{filepath.Join(o.testbin, "etcd"), filepath.Join(o.testbin, "kube-apiserver"), filepath.Join(o.testbin, "kubectl"), filepath.Join(o.testbin, "trainer-controller-manager"), bins.operator} {
		if _, err := os.Stat(b); err != nil {
			return bins, crds, fmt.Errorf("%s is missing: run hack/testbin/build.sh etcd kube-apiserver kubectl trainer", b)
		}
	}
	// Upstream's own CRDs and configuration, from the very module its
	// binary was built from.
	trainerDir, err := repo.ModuleDir(upstreamtrainer.Module, "hack/testbin/controllers")
	if err != nil {
		return bins, crds, err
	}
	jobsetDir, err := repo.ModuleDir("sigs.k8s.io/jobset", ".")
	if err != nil {
		return bins, crds, err
	}
	crds.trainer = filepath.Join(trainerDir, "manifests", "base", "crds")
	crds.jobset = filepath.Join(jobsetDir, "config", "components", "crd", "bases")
	// Torus's own CRD (MPINetworkProfile): its operator watches it.
	crds.torus = filepath.Join("kustomize", "crd", "torus")
	if crds.torus, err = filepath.Abs(crds.torus); err != nil {
		return bins, crds, err
	}
	bins.upstreamConfig = upstreamtrainer.ShippedConfig(trainerDir)
	return bins, crds, nil
}

// goBuild builds a command of this tree as make build ships it, and as
// hack/testbin builds upstream's binary: stripped, without cgo.
func goBuild(out, pkg string) error {
	cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// result is one contender at one N.
type result struct {
	Contender contender
	N         int
	Run       int    // 1 to -runs
	Load      string // load average when the run started
	Err       string
	Done      int
	Total     time.Duration
	P50, P99  time.Duration
	// Writes are the contender's requests during the batch, until it was
	// quiet for quietWindow.
	Writes counts
	// Usage is the controller process at the end of the batch; CPU is its
	// CPU seconds during the batch, APICPU the API server's.
	Usage  usage
	CPU    float64
	APICPU float64
	// Steady are the writes during the rest window.
	Steady       *counts
	SteadyWindow time.Duration
	// BigJobSet and BigAll time the large job to its JobSet and to all
	// three objects.
	BigJobSet, BigAll time.Duration
	BigErr            string
	// Listing times the plugin against kubectl get on Torus's largest
	// batch.
	Listing    *listing
	ListingErr string
	// Jobs times describe and wait on one job of Torus's largest batch.
	Jobs    *jobCommands
	JobsErr string
}

// quietWindow: a contender is done when it wrote nothing but lease
// renewals for this long.
const quietWindow = 3 * time.Second

func (r *result) summary() string {
	if r.Err != "" {
		return fmt.Sprintf("%-16s N=%-5d run %d FAILED: %s", r.Contender.Name, r.N, r.Run, r.Err)
	}
	return fmt.Sprintf("%-16s N=%-5d run %d total %6.2fs  p50 %6.2fs  p99 %6.2fs  writes/job %.2f  peak RSS %s (now %s heap, %s binary)  CPU %.1fs  apiserver CPU %.1fs",
		r.Contender.Name, r.N, r.Run, r.Total.Seconds(), r.P50.Seconds(), r.P99.Seconds(),
		float64(r.Writes.total(func(w write) bool { return !w.lease() }))/float64(r.N),
		mib(r.Usage.PeakRSS), mib(r.Usage.RSSAnon), mib(r.Usage.RSSFile), r.CPU, r.APICPU)
}

func measureOne(ctx context.Context, o options, bins binaries, crds crdSources, c contender, n, run int, largest, smallest bool) *result {
	r := &result{Contender: c, N: n, Run: run, Load: loadAverage()}
	if err := measure(ctx, o, bins, crds, c, n, largest, smallest, r); err != nil {
		r.Err = err.Error()
	}
	return r
}

func measure(ctx context.Context, o options, bins binaries, crds crdSources, c contender, n int, largest, smallest bool, r *result) error {
	st, err := setUp(ctx, o, bins, crds, c, n, r.Run)
	if err != nil {
		return err
	}
	defer st.stop()
	cp, proxy, mc, bench, ctrl := st.cp, st.proxy, st.mc, st.bench, st.ctrl

	t := newTracker(nsBench, n, c.makesConfigMap())
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := t.start(tctx, mc); err != nil {
		return err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("mpi-%04d", i)
	}
	before := proxy.snapshot()
	ctrlBefore, apiBefore := usageOf(ctrl), usageOfProc(cp.api)
	profDone := make(chan error, 2)
	profiles := 0
	if ctrl != nil && ctrl.pprof != "" {
		profiles++
		go func() {
			profDone <- fetchProfile(ctx, ctrl.pprof, "profile", fmt.Sprintf("?seconds=%d", o.pprofSecs), filepath.Join(o.pprofDir, "cpu.pprof"))
		}()
	}
	if o.pprofDir != "" && largest && r.Run == 1 && (c.Name == "torus" || c.Kind == kindFloor) {
		// What each job costs the API server, where the time goes.
		profiles++
		go func() {
			profDone <- cp.fetchProfile(ctx, fmt.Sprintf("?seconds=%d", o.pprofSecs), filepath.Join(o.pprofDir, "apiserver-"+c.Name+".pprof"))
		}()
	}
	logf("%s N=%d: creating %d TrainJobs of %d workers", c.Name, n, n, o.workers)
	start, err := bench.run(ctx, t, names, o.workers)
	if err != nil {
		return err
	}
	waitErr := t.wait(ctx, o.timeout)
	lat, last := t.latencies()
	r.Done = len(lat)
	r.Total = last.Sub(start)
	r.P50, r.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	if waitErr != nil {
		return waitErr
	}
	// Status updates and the like may follow the objects: count until the
	// contender is quiet.
	proxy.quiet(ctx, quietWindow, time.Minute)
	r.Writes = proxy.snapshot().sub(before)
	// The quiet window is idle time; CPU seconds do not grow in it.
	ctrlAfter, apiAfter := usageOf(ctrl), usageOfProc(cp.api)
	r.Usage = ctrlAfter
	r.CPU, r.APICPU = ctrlAfter.CPU-ctrlBefore.CPU, apiAfter.CPU-apiBefore.CPU
	for range profiles {
		if err := <-profDone; err != nil {
			return err
		}
	}
	if ctrl != nil && ctrl.pprof != "" {
		for _, p := range []string{"heap", "allocs"} {
			if err := fetchProfile(ctx, ctrl.pprof, p, "", filepath.Join(o.pprofDir, p+".pprof")); err != nil {
				return err
			}
		}
		// The text form ends with the runtime's memory statistics: how
		// large the heap grew (HeapSys) against what is live.
		if err := fetchProfile(ctx, ctrl.pprof, "heap", "?debug=1", filepath.Join(o.pprofDir, "heap.txt")); err != nil {
			return err
		}
		logf("profiles in %s", o.pprofDir)
	}

	if c.Steady && largest && r.Run == 1 && ctrl != nil {
		logf("%s N=%d: counting writes at rest for %s", c.Name, n, o.steady)
		s0 := proxy.snapshot()
		select {
		case <-time.After(o.steady):
		case <-ctx.Done():
			return ctx.Err()
		}
		s := proxy.snapshot().sub(s0)
		r.Steady, r.SteadyWindow = &s, o.steady
	}
	if c.Name == "torus" && largest {
		logf("%s N=%d: kubectl mpi list -A against kubectl get trainjobs -A", c.Name, n)
		if r.Listing, err = measureListing(ctx, cp, bins, st.dir); err != nil {
			r.ListingErr = err.Error()
		}
		logf("%s N=%d: kubectl mpi describe and wait on one job", c.Name, n)
		if r.Jobs, err = measureJobCommands(ctx, cp, bins, st.dir, names[0]); err != nil {
			r.JobsErr = err.Error()
		}
	}
	if smallest && o.bigWorkers > 0 {
		if err := measureBig(ctx, o, bench, mc, r); err != nil {
			r.BigErr = err.Error()
		}
	}
	return nil
}

// stand is one contender ready to measure: its own etcd and API server
// and, unless it is a floor, its controller with its caches warm.
type stand struct {
	dir   string
	cp    *controlPlane
	proxy *countingProxy
	mc    metadata.Interface
	bench *creator
	ctrl  *running
	stops []func()
}

func (st *stand) stop() {
	for _, s := range slices.Backward(st.stops) {
		s()
	}
}

// setUp starts what contender c runs on, and c.
func setUp(ctx context.Context, o options, bins binaries, crds crdSources, c contender, n, run int) (_ *stand, err error) {
	st := &stand{dir: filepath.Join(o.work, fmt.Sprintf("%s-%d-%d", c.Name, n, run))}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(st.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	logf("%s N=%d run %d: starting etcd and kube-apiserver", c.Name, n, run)
	cp, proxy, mc, stop, err := startBare(ctx, st.dir, o.testbin, crds, o.placement)
	if err != nil {
		return nil, err
	}
	st.stops = append(st.stops, stop)
	st.cp, st.proxy, st.mc = cp, proxy, mc
	st.bench = &creator{c: cp.client, concurrency: o.concurrency}
	if c.Kind == kindFloor {
		// The floor writes the objects through the proxy, so its requests
		// take the same path as a contender's and are counted the same way;
		// its TrainJobs are created directly, as in a contender's run.
		cfg := cp.ca.AdminConfig(proxy.URL)
		cfg.QPS, cfg.Burst, cfg.UserAgent = -1, 0, "torus-bench-floor"
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, err
		}
		plain, err := client.New(cfg, client.Options{Scheme: scheme.New(), HTTPClient: httpClient})
		if err != nil {
			return nil, err
		}
		// Its creates are answered as the operator's are: with the new
		// object's metadata only.
		pc := metacreate.Wrap(plain, cfg, httpClient)
		rt, err := samples.Runtime(runtimeName)
		if err != nil {
			return nil, err
		}
		st.bench.children, st.bench.floor = pc, &mpi.Runtime{
			Kind: trainer.ClusterTrainingRuntimeKind, Name: rt.Name, Annotations: rt.Annotations, Spec: rt.Spec,
		}
		st.bench.hostfileConfigMap = c.makesConfigMap()
		st.bench.behind = c.Behind
		return st, nil
	}
	pprof := o.pprofDir != "" && c.Kind == kindTorus && n == slices.Max(o.sizes) && (run == 1 || o.chunk > 0)
	logf("%s N=%d: starting the controller", c.Name, n)
	if st.ctrl, err = startContender(ctx, c, bins, cp, proxy, st.dir, pprof, o.torusFlags); err != nil {
		return nil, err
	}
	st.stops = append(st.stops, st.ctrl.stop)
	// One job end to end proves the controller has its caches and its
	// lease before the clock starts.
	warm := newTracker(nsWarmup, 1, c.makesConfigMap())
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := warm.start(wctx, mc); err != nil {
		return nil, err
	}
	if err := (&creator{c: cp.client, concurrency: 1}).one(ctx, warm, "warmup", o.workers); err != nil {
		return nil, err
	}
	if err := warm.wait(ctx, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("warm-up job: %w (log: %s)", err, st.ctrl.proc.Log)
	}
	proxy.quiet(ctx, quietWindow, 30*time.Second)
	return st, nil
}

// measureBig times one TrainJob of o.bigWorkers workers to its JobSet.
func measureBig(ctx context.Context, o options, bench *creator, mc metadata.Interface, r *result) error {
	logf("%s: one TrainJob of %d workers", r.Contender.Name, o.bigWorkers)
	t := newTracker(nsBig, 1, r.Contender.makesConfigMap())
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := t.start(tctx, mc); err != nil {
		return err
	}
	single := *bench
	single.concurrency = 1
	if err := single.one(ctx, t, "big", o.bigWorkers); err != nil {
		return err
	}
	if err := t.wait(ctx, 2*time.Minute); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	jt := t.jobs["big"]
	r.BigJobSet, r.BigAll = jt.jobSet.Sub(jt.created), jt.done().Sub(jt.created)
	return nil
}

func usageOf(r *running) usage {
	if r == nil {
		return usage{}
	}
	return usageOfProc(r.proc)
}

func usageOfProc(p *supervisor.Process) usage {
	u, err := readUsage(p.PID())
	if err != nil {
		logf("reading /proc of pid %d: %v", p.PID(), err)
	}
	return u
}
