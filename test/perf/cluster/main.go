// Command benche2e measures, on the local cluster (make cluster-up), how
// long MPI jobs take from TrainJob creation until Kueue admitted them and
// until every pod (launcher and workers) runs: one job of 1, 8, 64 and 256
// workers, then 50 jobs of 4 workers submitted at once, and the work the
// controller did for each. With -maxima, one job of each given size
// instead, against the floor of its JobSet created directly, with the
// operator's peak memory and how long the plugin and the dashboard take to
// answer about it (maxima.go). With -many, that many jobs at once, against
// the floor of their JobSets created directly (many.go). With
// -mpi-operator, the same jobs as Torus's TrainJobs and as MPIJobs with
// Kubeflow's mpi-operator (mpioperator.go). With -maxima N -floor=false
// -save-floor FILE and then -floor-of FILE on a fresh cluster, Torus's job
// and its floor each on a cluster of its own (apart.go). With -upstream,
// the same jobs on upstream Trainer's published MPI runtime, with
// upstream's controller (test/localcluster -upstream-trainer), and with
// neither Torus nor upstream queued
// (-queue=false): Kueue's JobSet integration admits upstream's JobSets
// only with a label upstream does not give them. With -real-node,
// real jobs on the cluster's real nodes instead, each beside the floor of
// the same pods as a plain JobSet (realnode.go); with -upstream too, the
// same jobs on upstream Trainer's published MPI runtime, on a cluster
// where upstream's controller runs instead of Torus (test/localcluster
// -upstream-trainer; upstream.go).
//
//	go run ./test/perf/cluster -kubeconfig .cluster/kubeconfig [-upstream | -queue=false | -maxima 1024,4096 | -floor-of FILE | -many 1000x8 | -mpi-operator 1024,200x8] [-real-node [-upstream | -sections hosts]]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/samples"
)

type result struct {
	jobSet, admitted, running time.Duration
	// status is when the TrainJob's status first said Running.
	status time.Duration
}

func main() {
	// The watches' own log lines are not the benchmark's output.
	ctrllog.SetLogger(logr.Discard())
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one.
	fs := flag.NewFlagSet("benche2e", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", ".cluster/kubeconfig", "the local cluster's kubeconfig")
	real := fs.Bool("real-node", false, "time real jobs on the cluster's real node (test/localcluster up -real-node) instead")
	upstream := fs.Bool("upstream", false, "on upstream Trainer's MPI runtime, unqueued (test/localcluster up -upstream-trainer, with -real-node for real jobs)")
	queue := fs.Bool("queue", true, "without -real-node, submit Torus's jobs through a Kueue queue")
	sections := fs.String("sections", "start,launch,training,restart", "with -real-node and not -upstream, what to measure: start (2-worker jobs beside the floor), launch (16 hosts), training (the reference training at 1, 2 and 4 ranks), restart (a worker's pod deleted: the new run's start against the cold start), hosts (jobs of -hosts workers, up to as many as the real nodes hold)")
	hosts := fs.String("hosts", "2,4,8,16,32,64,128,max", "with -sections hosts: the jobs' sizes in workers of one rank, ascending; max: as many as the real nodes hold")
	hostRuns := fs.Int("host-runs", 3, "with -sections hosts: jobs of each size and remote launch")
	maxima := fs.String("maxima", "", "without -real-node: instead of the usual scenarios, one job of each of these sizes (workers, comma-separated, such as 1024,4096,16384) through Kueue, each against the floor of its JobSet created directly, with the operator's peak memory and the plugin's answers at that size")
	plugin := fs.String("plugin", "bin/kubectl-mpi", "with -maxima, the plugin binary whose answers are timed")
	floor := fs.Bool("floor", true, "with -maxima or -many, run the floor after Torus's jobs")
	saveFloor := fs.String("save-floor", "", "with -maxima and -floor=false, write the last size's floor and Torus's figures to this file, for -floor-of on a fresh cluster")
	floorOfFile := fs.String("floor-of", "", "without -real-node: instead of the usual scenarios, start the floor a -save-floor run wrote and print it beside that run's figures")
	many := fs.String("many", "", "without -real-node: instead of the usual scenarios, JOBSxWORKERS (such as 1000x8): that many jobs created at once through Kueue, against the floor of their JobSets created directly, with each job's creation → JobSet, admission and status lag")
	vsMPIOperator := fs.String("mpi-operator", "", "without -real-node: instead of the usual scenarios, each case (N: one job of N workers; JOBSxWORKERS: that many at once, comma-separated, such as 1024,4096,200x8) as Torus's TrainJobs and then as MPIJobs with Kubeflow's mpi-operator, both through Kueue unless -queue=false (test/localcluster up -kueue-mpijob), with each controller's CPU, memory and requests")
	mpiOperatorBin := fs.String("mpi-operator-bin", ".testbin/bin/mpi-operator", "with -mpi-operator, the mpi-operator binary (hack/testbin/build.sh mpi-operator)")
	mpiOperatorArgs := fs.String("mpi-operator-args", "", "with -mpi-operator, more flags for mpi-operator, space-separated (such as --controller-queue-rate-limit=1000)")
	_ = fs.Parse(os.Args[1:])
	var mo *maximaOptions
	if *maxima != "" {
		sizes, err := parseSizes(*maxima)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benche2e:", err)
			os.Exit(2)
		}
		mo = &maximaOptions{sizes: sizes, plugin: *plugin, kubeconfig: *kubeconfig, floor: *floor, saveFloor: *saveFloor}
		if *saveFloor != "" && *floor {
			fmt.Fprintln(os.Stderr, "benche2e: -save-floor is for a run without its floor: add -floor=false")
			os.Exit(2)
		}
	}
	var mn *manyOptions
	if *many != "" {
		o, err := parseMany(*many)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benche2e:", err)
			os.Exit(2)
		}
		o.floor, o.kubeconfig = *floor, *kubeconfig
		mn = &o
	}
	var vs *mpiOperatorOptions
	if *vsMPIOperator != "" {
		cases, err := parseMPICases(*vsMPIOperator)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benche2e:", err)
			os.Exit(2)
		}
		vs = &mpiOperatorOptions{cases: cases, bin: *mpiOperatorBin, args: strings.Fields(*mpiOperatorArgs), queued: *queue}
	}
	hostSizes, err := parseHosts(*hosts)
	if err == nil && *hostRuns < 1 {
		err = fmt.Errorf("-host-runs wants a positive count, got %d", *hostRuns)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		os.Exit(2)
	}
	ho := hostsOptions{sizes: hostSizes, runs: *hostRuns}
	k := kwokContender{runtime: "bench-openmpi", queue: *queue, label: "Torus"}
	if *upstream {
		k = kwokContender{runtime: upstreamRuntime, upstream: true}
	}
	if err := run(*kubeconfig, *real, *upstream, k, strings.Split(*sections, ","), ho, mo, *floorOfFile, mn, vs); err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		os.Exit(1)
	}
}

// kwokContender is what the kwok benchmark submits: Torus's jobs, queued
// or not, or upstream's.
type kwokContender struct {
	runtime  string
	queue    bool
	upstream bool
	// label names the contender in the tables.
	label string
}

func run(kubeconfig string, real, upstream bool, k kwokContender, sections []string, ho hostsOptions, mo *maximaOptions, floorFile string, mn *manyOptions, vs *mpiOperatorOptions) error {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("bench-%d", time.Now().Unix())
	if real {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		defer func() { _ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) }()
		rcs := torusContenders
		if upstream {
			rc, err := upstreamContender(ctx, c)
			if err != nil {
				return err
			}
			rcs = []realContender{rc}
			defer func() {
				_ = c.Delete(ctx, &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: upstreamRuntime}})
			}()
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if upstream {
			return runReal(ctx, c, cs, ns, rcs)
		}
		for _, s := range sections {
			switch s {
			case "start":
				err = runReal(ctx, c, cs, ns, rcs)
			case "launch":
				err = runLaunchAtScale(ctx, c, cs, ns)
			case "training":
				err = runTrainingScaling(ctx, c, cs, ns)
			case "restart":
				err = runRestarts(ctx, c, cs, ns)
			case "hosts":
				err = runHosts(ctx, c, cs, ns, ho)
			default:
				err = fmt.Errorf("-sections: unknown section %q", s)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := setup(ctx, c, ns, &k); err != nil {
		return err
	}
	if k.upstream {
		defer func() {
			_ = c.Delete(ctx, &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: upstreamRuntime}})
		}()
	}
	defer func() { _ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) }()
	w, err := newWatcher(ctx, cfg, ns)
	if err != nil {
		return err
	}

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	meter, err := newOperatorMeter(ctx, c, cs, kubeconfig, ns, k.upstream)
	if err != nil {
		return err
	}
	defer meter.cleanup(ctx, c, ns)
	if floorFile != "" {
		return runApartFloor(ctx, c, cs, w, ns, floorFile, kubeconfig)
	}
	if mo != nil {
		return runMaxima(ctx, c, cs, w, meter, ns, k, *mo)
	}
	if mn != nil {
		return runMany(ctx, c, cs, w, meter, ns, k, *mn)
	}
	if vs != nil {
		return runVsMPIOperator(ctx, c, cfg, w, meter, ns, k, *vs)
	}
	var works []string
	queued := "not queued"
	if k.queue {
		queued = "through Kueue"
	}
	fmt.Printf("%s, %s:\n\n", k.label, queued)
	fmt.Println("| scenario | creation → JobSet | creation → admitted | creation → all pods Running |")
	fmt.Println("| --- | --- | --- | --- |")
	for _, workers := range []int32{1, 8, 64, 256} {
		before, err := meter.read(ctx)
		if err != nil {
			return err
		}
		res, err := measure(ctx, c, w, ns, k, []string{fmt.Sprintf("w%d", workers)}, workers)
		if err != nil {
			return err
		}
		after, err := meter.read(ctx)
		if err != nil {
			return err
		}
		d := after.minus(before)
		works = append(works, fmt.Sprintf("| 1 job, %d worker%s | %.0f | %.0f (%s) | %.2f s |", workers, map[bool]string{true: "", false: "s"}[workers == 1], d.reconciles, d.requests, d.byMethod, d.cpu.Seconds()))
		plural := "s"
		if workers == 1 {
			plural = ""
		}
		fmt.Printf("| 1 job, %d worker%s | %.2f s | %.2f s | %.2f s |\n", workers, plural, res[0].jobSet.Seconds(), res[0].admitted.Seconds(), res[0].running.Seconds())
	}
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("c%02d", i)
	}
	res, err := measure(ctx, c, w, ns, k, names, 4)
	if err != nil {
		return err
	}
	js, adm, runn := make([]time.Duration, len(res)), make([]time.Duration, len(res)), make([]time.Duration, len(res))
	for i, r := range res {
		js[i], adm[i], runn[i] = r.jobSet, r.admitted, r.running
	}
	for _, p := range []int{50, 95, 100} {
		label := fmt.Sprintf("p%d", p)
		if p == 100 {
			label = "max"
		}
		fmt.Printf("| 50 jobs × 4 workers created at once, %s | %.2f s | %.2f s | %.2f s |\n", label, pct(js, p).Seconds(), pct(adm, p).Seconds(), pct(runn, p).Seconds())
	}
	fmt.Printf("\nThe work of %s's TrainJob controller for each job, from its creation until its pods are gone again (start and deletion):\n", k.label)
	fmt.Println("\n| scenario | TrainJob reconciles | API requests (by method) | operator CPU |")
	fmt.Println("| --- | --- | --- | --- |")
	for _, l := range works {
		fmt.Println(l)
	}
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := (len(s)*p + 99) / 100
	return s[max(idx-1, 0)]
}

// setup makes a namespace, a queue with room for everything measured, and
// a runtime whose launcher runs for an hour, so that "all pods Running" is
// a state that lasts.
func setup(ctx context.Context, c client.Client, ns string, k *kwokContender) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "bench-flavor"}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, flavor)); err != nil {
		return err
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
				Flavors: []kueue.FlavorQuotas{{Name: "bench-flavor", Resources: []kueue.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("5000")},
				}}},
			}},
		},
	}
	if err := c.Create(ctx, cq); err != nil {
		return err
	}
	if err := c.Create(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(ns)}}); err != nil {
		return err
	}
	rt, err := samples.Runtime("torus-openmpi")
	if err != nil {
		return err
	}
	if k.upstream {
		up, version, err := upstreamMPIRuntime()
		if err != nil {
			return err
		}
		// The launcher is not a node, so the job's shape is Torus's.
		up.Spec.MLPolicy.MPI.RunLauncherAsNode = ptr.To(false)
		rt = up
		k.label = "upstream Trainer " + version + " (deepspeed-distributed)"
	}
	rt.ObjectMeta = metav1.ObjectMeta{Name: k.runtime}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template
		pod.Annotations = map[string]string{"torus-mpi.io/kwok-run-duration": "1h"}
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, rt))
}

// measure creates the jobs at once and times each to admission and to all
// pods Running, from watches (polling 50 jobs would load the API server it
// measures, and queue behind the client's own rate limiter), then deletes
// them.
func measure(ctx context.Context, c client.Client, w *watcher, ns string, k kwokContender, names []string, workers int32) ([]result, error) {
	run, err := burst(ctx, w, names, workers+1, 5*time.Minute, func(n string) client.Object {
		return benchTrainJob(ns, n, k.runtime, workers, k.queue)
	}, c)
	if err != nil {
		return nil, err
	}
	results := run.results
	for _, n := range names {
		_ = c.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
	// Let the pods go before the next scenario.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err == nil && len(pods.Items) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	return results, nil
}

// benchTrainJob is a TrainJob of the benchmark's runtime, queued in its
// Kueue queue when queued.
func benchTrainJob(ns, name, runtime string, workers int32, queued bool) *trainer.TrainJob {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: runtime},
			Trainer: &trainer.Trainer{NumNodes: ptr.To(workers), ResourcesPerNode: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			}},
		},
	}
	if queued {
		tj.Labels = map[string]string{mpi.KueueQueueLabel: "bench"}
	}
	return tj
}

// watcher records, from informers on the benchmark's namespace, when each
// job's JobSet appeared, when it was admitted, and when all its pods ran.
type watcher struct {
	mu      sync.Mutex
	pods    map[string]int32 // pods each job has when all run
	start   map[string]time.Time
	res     map[string]*result
	running map[string]map[string]bool // job → its running pods
	changed chan struct{}
}

func newWatcher(ctx context.Context, cfg *rest.Config, ns string) (*watcher, error) {
	w := &watcher{
		pods: map[string]int32{}, start: map[string]time.Time{}, res: map[string]*result{},
		running: map[string]map[string]bool{}, changed: make(chan struct{}, 1),
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	handlers := map[client.Object]func(obj any){
		&jobsetv1alpha2.JobSet{}: func(obj any) {
			if js, ok := obj.(*jobsetv1alpha2.JobSet); ok {
				w.record(js.Name, func(r *result, d time.Duration) { setOnce(&r.jobSet, d) })
			}
		},
		&trainer.TrainJob{}: func(obj any) {
			tj, ok := obj.(*trainer.TrainJob)
			if !ok {
				return
			}
			if meta.IsStatusConditionTrue(tj.Status.Conditions, trainjob.ConditionAdmitted) {
				w.record(tj.Name, func(r *result, d time.Duration) { setOnce(&r.admitted, d) })
			}
			if meta.IsStatusConditionTrue(tj.Status.Conditions, trainjob.ConditionRunning) {
				w.record(tj.Name, func(r *result, d time.Duration) { setOnce(&r.status, d) })
			}
		},
		&corev1.Pod{}: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				w.pod(p)
			}
		},
	}
	for obj, h := range handlers {
		inf, err := ca.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    h,
			UpdateFunc: func(_, obj any) { h(obj) },
		}); err != nil {
			return nil, err
		}
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the benchmark's informers did not sync")
	}
	return w, nil
}

func setOnce(d *time.Duration, v time.Duration) {
	if *d == 0 {
		*d = v
	}
}

func (w *watcher) expect(names []string, pods int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		w.pods[n], w.res[n], w.running[n] = pods, &result{}, map[string]bool{}
	}
}

func (w *watcher) started(name string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start[name] = at
}

// record applies set to a job's result with the time since its creation
// request, once that request was sent.
func (w *watcher) record(name string, set func(*result, time.Duration)) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	r, start := w.res[name], w.start[name]
	if r == nil || start.IsZero() {
		return
	}
	set(r, now.Sub(start))
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *watcher) pod(p *corev1.Pod) {
	// Torus's and upstream's JobSets alike are named for their TrainJob;
	// mpi-operator's pods carry their MPIJob's name.
	name := p.Labels[jobsetv1alpha2.JobSetNameKey]
	if name == "" {
		name = p.Labels[mpiJobNameLabel]
	}
	w.mu.Lock()
	if run := w.running[name]; run != nil && p.Status.Phase == corev1.PodRunning {
		run[p.Name] = true
	}
	all := w.running[name] != nil && int32(len(w.running[name])) == w.pods[name]
	w.mu.Unlock()
	if all {
		w.record(name, func(r *result, d time.Duration) {
			setOnce(&r.running, d)
			// Kueue's admission shows on the TrainJob after the pods
			// may already run.
			setOnce(&r.admitted, d)
		})
	}
}

// waitTimeout is a wait that ended before every job ran.
type waitTimeout struct {
	running, jobs int
	after         time.Duration
}

func (e *waitTimeout) Error() string {
	return fmt.Sprintf("%d of %d jobs had all their pods running after %s", e.running, e.jobs, e.after)
}

// wait returns the jobs' results once all their pods ran.
func (w *watcher) wait(ctx context.Context, names []string, timeout time.Duration) ([]result, error) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		out, running := make([]result, len(names)), 0
		for i, n := range names {
			out[i] = *w.res[n]
			if out[i].running > 0 {
				running++
			}
		}
		w.mu.Unlock()
		if running == len(names) {
			return out, nil
		}
		select {
		case <-w.changed:
		case <-deadline:
			return nil, &waitTimeout{running: running, jobs: len(names), after: timeout}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
