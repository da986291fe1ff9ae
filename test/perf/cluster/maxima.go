package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/test/perf/answers"
)

// maximaOptions is what the maxima section needs beyond the cluster: the
// plugin binary whose answers it times, and the kubeconfig it gives it.
type maximaOptions struct {
	sizes      []int32
	plugin     string
	kubeconfig string
	// floor runs each size's floor after Torus's job; without it a size
	// takes half as long.
	floor bool
	// saveFloor, without floor, is where the last size's floor and Torus's
	// figures go, for -floor-of on a fresh cluster.
	saveFloor string
}

// parseSizes reads a comma-separated list of worker counts.
func parseSizes(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 1 || n > int64(mpi.DefaultMaxNodes) {
			return nil, fmt.Errorf("-maxima: %q is not a worker count from 1 to %d", f, mpi.DefaultMaxNodes)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// maximaRow is one size's figures.
type maximaRow struct {
	workers int32
	torus   result
	floor   time.Duration
	work    operatorWork
	peakRSS int64 // bytes, sampled while the job started
	answers []answers.Answer
	// answerCPU is the cluster's CPU over each answer's three tries, by
	// component: what serving it cost, the simulated kubelets included.
	answerCPU []counts
	// topSource says where top read usage, and whether it was timed.
	topSource string
	// writes are the API server's, every component's, while Torus's job
	// and the floor's started.
	writes, floorWrites counts
	// cpu is the CPU time of every process of the local cluster while
	// Torus's job and the floor's started, by component: on a machine
	// whose cores they share, where the difference between the two goes.
	cpu, floorCPU counts
}

// runMaxima runs, for each size, one job of that many workers through the
// Kueue queue on the kwok nodes, then the same JobSet created directly (the
// floor), each from creation until all its pods run, one after the other on
// empty nodes. While Torus's job runs it times the plugin's answers about
// it. Sizes go smallest first: a failure at one size leaves the figures of
// the smaller ones printed.
func runMaxima(ctx context.Context, c client.Client, cs kubernetes.Interface, w *watcher, meter *operatorMeter, ns string, k kwokContender, o maximaOptions) error {
	fmt.Println("# The largest job: one MPI job end to end")
	fmt.Println()
	fmt.Printf("`make bench-maxima` (MAXIMA=%s) on %d cores, %s. One job through Kueue on %s, from its creation to all its pods Running, "+
		"then the floor: the JobSet Torus made for it, created directly through the same queue with its pods unchanged, on empty nodes. "+
		"The operator's figures are its whole process while the job started: resident memory sampled every 200 ms, CPU time, and its API requests by method.\n\n",
		sizesString(o.sizes), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"), kwokNodesSummary(ctx, c))
	fmt.Println("| workers | creation → JobSet | creation → admitted | creation → all pods Running | floor: all pods Running | ratio | operator RSS peak | operator CPU | operator API requests |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	var rows []maximaRow
	for i, n := range o.sizes {
		row, err := maximaSize(ctx, c, cs, w, meter, ns, k, o, n, i == len(o.sizes)-1)
		if err != nil {
			return fmt.Errorf("%d workers: %w", n, err)
		}
		rows = append(rows, row)
		floor, ratio := "not run", "—"
		if row.floor > 0 {
			floor, ratio = fmt.Sprintf("%.1f s", row.floor.Seconds()), fmt.Sprintf("%.2f", row.torus.running.Seconds()/row.floor.Seconds())
		}
		fmt.Printf("| %d | %.1f s | %.1f s | %.1f s | %s | %s | %.0f MiB | %.1f s | %.0f (%s) |\n", n,
			row.torus.jobSet.Seconds(), row.torus.admitted.Seconds(), row.torus.running.Seconds(), floor, ratio,
			float64(row.peakRSS)/(1<<20), row.work.cpu.Seconds(), row.work.requests, row.work.byMethod)
	}
	fmt.Printf("\nHow long each answer about the running job took (median of 3), at each size; %s:\n", rows[0].topSource)
	fmt.Println()
	header := "| workers |"
	sep := "| --- |"
	for _, a := range rows[0].answers {
		header += " " + a.What + " |"
		sep += " --- |"
	}
	fmt.Println(header)
	fmt.Println(sep)
	for _, r := range rows {
		line := fmt.Sprintf("| %d |", r.workers)
		for _, a := range r.answers {
			if a.Err != "" {
				line += " failed: " + a.Err + " |"
				continue
			}
			line += fmt.Sprintf(" %.2f s |", a.Median.Seconds())
		}
		fmt.Println(line)
	}
	fmt.Println("\nThe cluster's CPU over each answer's three tries, in seconds, by process (kwok serves every simulated kubelet's logs and metrics from the same cores):")
	fmt.Println()
	for _, r := range rows {
		for i, a := range r.answers {
			if i < len(r.answerCPU) {
				fmt.Printf("- %d workers, %s: %.1f (%s)\n", r.workers, a.What, r.answerCPU[i].total(), r.answerCPU[i].tenths())
			}
		}
	}
	printEachSize("The API server's writes, every component's, while each job started:", rows, func(r maximaRow) (counts, counts) { return r.writes, r.floorWrites })
	printEachSize("The cluster's CPU while each job started, in seconds, every process of the local cluster:", rows, func(r maximaRow) (counts, counts) { return r.cpu, r.floorCPU })
	return nil
}

// printEachSize prints a list of counts by component, Torus's and the
// floor's (of), one item a size.
func printEachSize(title string, rows []maximaRow, of func(maximaRow) (torus, floor counts)) {
	fmt.Println("\n" + title)
	fmt.Println()
	for _, r := range rows {
		torus, floor := of(r)
		floorText := "not run"
		if r.floor > 0 {
			floorText = fmt.Sprintf("%.0f (%s)", floor.total(), floor)
		}
		fmt.Printf("- %d workers: Torus's %.0f (%s); the floor's %s.\n", r.workers, torus.total(), torus, floorText)
	}
}

// sizesString is sizes as -maxima takes them.
func sizesString(sizes []int32) string {
	parts := make([]string, len(sizes))
	for i, n := range sizes {
		parts[i] = strconv.Itoa(int(n))
	}
	return strings.Join(parts, ",")
}

// kwokNodesSummary names the nodes the jobs land on.
func kwokNodesSummary(ctx context.Context, c client.Client) string {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return "the kwok nodes"
	}
	n := 0
	var pods resource.Quantity
	for _, node := range nodes.Items {
		if node.Annotations["kwok.x-k8s.io/node"] == "fake" {
			n++
			pods.Add(node.Status.Allocatable[corev1.ResourcePods])
		}
	}
	return fmt.Sprintf("%d kwok nodes (room for %s pods)", n, pods.String())
}

// maximaSize measures one size: Torus's job, the answers about it, then the
// floor.
func maximaSize(ctx context.Context, c client.Client, cs kubernetes.Interface, w *watcher, meter *operatorMeter, ns string, k kwokContender, o maximaOptions, workers int32, last bool) (maximaRow, error) {
	row := maximaRow{workers: workers}
	name := fmt.Sprintf("big-%d", workers)
	timeout := startTimeout(workers)
	before, err := meter.read(ctx)
	if err != nil {
		return row, err
	}
	writes, err := readServerWrites(ctx, cs)
	if err != nil {
		return row, err
	}
	cpu, err := clusterCPU(o.kubeconfig)
	if err != nil {
		return row, err
	}
	rss := sampleRSS(meter.pid)
	tj := benchTrainJob(ns, name, k.runtime, workers, true)
	w.expect([]string{name}, workers+1)
	w.started(name, time.Now())
	if err := c.Create(ctx, tj); err != nil {
		return row, fmt.Errorf("creating %s: %w", name, err)
	}
	res, err := w.wait(ctx, []string{name}, timeout)
	row.peakRSS = rss.stop()
	if err != nil {
		return row, err
	}
	row.torus = res[0]
	if row.cpu, err = cpuSince(o.kubeconfig, cpu); err != nil {
		return row, err
	}
	if row.writes, err = writesSince(ctx, cs, writes); err != nil {
		return row, err
	}
	after, err := meter.read(ctx)
	if err != nil {
		return row, err
	}
	row.work = after.minus(before)
	if row.answers, row.answerCPU, row.topSource, err = timeAnswers(ctx, c, o, ns, name, workers); err != nil {
		return row, err
	}
	var js jobsetv1alpha2.JobSet
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js); err != nil {
		return row, err
	}
	floor := floorOf(&js, "floor-"+strconv.Itoa(int(workers)))
	if !o.floor && last {
		// Nothing runs after it: the cluster's teardown takes its pods.
		if o.saveFloor != "" {
			return row, saveApartFloor(o.saveFloor, row, floor)
		}
		return row, nil
	}
	if err := drain(ctx, c, ns, tj, timeout); err != nil {
		return row, err
	}
	if !o.floor {
		return row, nil
	}
	if row.floor, row.floorCPU, row.floorWrites, err = startFloor(ctx, c, cs, w, o.kubeconfig, floor, workers); err != nil {
		return row, err
	}
	if last {
		return row, nil
	}
	return row, drain(ctx, c, ns, floor, timeout)
}

// floorOf is the JobSet Torus made, as a user would create it directly
// through the same queue: its pods unchanged but for what ties them to
// Torus (its labels, which the operator's caches select, and the
// scheduling gate Torus lifts once a run's keys exist) and what Kueue
// wrote into them when it admitted Torus's job, created suspended for
// Kueue to admit.
func floorOf(js *jobsetv1alpha2.JobSet, name string) *jobsetv1alpha2.JobSet {
	floor := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: js.Namespace, Labels: map[string]string{mpi.KueueQueueLabel: "bench"}},
		Spec:       *js.Spec.DeepCopy(),
	}
	floor.Spec.Suspend = ptr.To(true)
	// Its own headless Service and DNS names, as JobSet gives a JobSet
	// by default: Torus's names its job's.
	if floor.Spec.Network != nil {
		floor.Spec.Network.Subdomain = name
	}
	for i := range floor.Spec.ReplicatedJobs {
		tmpl := &floor.Spec.ReplicatedJobs[i].Template
		for _, meta := range []*metav1.ObjectMeta{&tmpl.ObjectMeta, &tmpl.Spec.Template.ObjectMeta} {
			for key := range meta.Labels {
				// The kwok stage that ends a launcher selects its role.
				if strings.HasPrefix(key, api.Domain) && key != api.LabelRole || strings.HasPrefix(key, kueueDomain) {
					delete(meta.Labels, key)
				}
			}
			for key := range meta.Annotations {
				if strings.HasPrefix(key, kueueDomain) {
					delete(meta.Annotations, key)
				}
			}
		}
		tmpl.Spec.Template.Spec.SchedulingGates = nil
		// The Job's selector and its pods' controller labels are the Job
		// controller's to set.
		tmpl.Spec.Selector = nil
		tmpl.Spec.ManualSelector = nil
		delete(tmpl.Spec.Template.Labels, "batch.kubernetes.io/controller-uid")
		delete(tmpl.Spec.Template.Labels, "controller-uid")
	}
	return floor
}

// startTimeout bounds the start of a job of workers: its pods take
// minutes to create and run on a small machine, so the wait grows with them
// (on 2 cores 55 ms a worker at 4,096 and 40 ms at 16,384; 200 ms leaves
// room for a busier one).
func startTimeout(workers int32) time.Duration {
	return 5*time.Minute + time.Duration(workers)*200*time.Millisecond
}

// startFloor creates the floor's JobSet of workers and waits until its pods
// all run: how long that took, and the cluster's CPU and the API server's
// writes meanwhile.
func startFloor(ctx context.Context, c client.Client, cs kubernetes.Interface, w *watcher, kubeconfig string, floor *jobsetv1alpha2.JobSet, workers int32) (time.Duration, counts, counts, error) {
	writes, err := readServerWrites(ctx, cs)
	if err != nil {
		return 0, nil, nil, err
	}
	cpu, err := clusterCPU(kubeconfig)
	if err != nil {
		return 0, nil, nil, err
	}
	w.expect([]string{floor.Name}, workers+1)
	w.started(floor.Name, time.Now())
	if err := c.Create(ctx, floor); err != nil {
		return 0, nil, nil, fmt.Errorf("creating the floor's JobSet: %w", err)
	}
	res, err := w.wait(ctx, []string{floor.Name}, startTimeout(workers))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("the floor: %w", err)
	}
	if cpu, err = cpuSince(kubeconfig, cpu); err != nil {
		return 0, nil, nil, err
	}
	if writes, err = writesSince(ctx, cs, writes); err != nil {
		return 0, nil, nil, err
	}
	return res[0].running, cpu, writes, nil
}

// kueueDomain prefixes what Kueue writes into an admitted job's pods.
const kueueDomain = "kueue.x-k8s.io/"

// drain is deleteAndDrain bounded by timeout.
func drain(ctx context.Context, c client.Client, ns string, obj client.Object, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := deleteAndDrain(ctx, c, ns, obj); err != nil {
		return fmt.Errorf("deleting %s and waiting %s for its pods to go: %w", obj.GetName(), timeout, err)
	}
	return nil
}

// rssSampler reads a process's resident memory every 200 ms and keeps the
// largest reading.
type rssSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak int64
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := residentBytes(pid); err == nil && v > s.peak {
				s.peak = v
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak.
func (s *rssSampler) stop() int64 {
	close(s.done)
	s.wg.Wait()
	return s.peak
}

// residentBytes is VmRSS from /proc/PID/status.
func residentBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// timeAnswers times what a user asks of the running job: the plugin's
// list, describe, top (where the cluster serves the metrics API, or the
// node proxy reaches kwok's nodes) and logs --tail (of every pod, of the
// launcher, of the last worker), and the dashboard's view of the job,
// three tries each. topSource says where top read usage.
func timeAnswers(ctx context.Context, c client.Client, o maximaOptions, ns, name string, workers int32) (out []answers.Answer, cpu []counts, topSource string, err error) {
	type command struct {
		what string
		args []string
	}
	commands := []command{
		{"list", []string{"list", "-n", ns}},
		{"describe", []string{"describe", name, "-n", ns}},
		{"logs --tail 10", []string{"logs", name, "-n", ns, "--tail", "10"}},
		{"logs --launcher --tail 10", []string{"logs", name, "-n", ns, "--launcher", "--tail", "10"}},
		{"logs --worker LAST --tail 10", []string{"logs", name, "-n", ns, "--worker", strconv.Itoa(int(workers) - 1), "--tail", "10"}},
	}
	served, err := metricsAPIServed(ctx, c, ns)
	if err != nil {
		return nil, nil, "", err
	}
	proxied, err := kwokNodesProxied(ctx, c)
	if err != nil {
		return nil, nil, "", err
	}
	switch {
	case served:
		// top shows what the metrics API serves: every pod's usage once
		// metrics-server has two scrapes of its node since it ran.
		waited, err := waitForPodMetrics(ctx, c, ns, name, int(workers)+1)
		if err != nil {
			return nil, nil, "", err
		}
		topSource = fmt.Sprintf("`top` reads the metrics API, which metrics-server serves from every node's resource metrics, scraped every 15 s (it served the usage of every pod of the job %.0f s after they all ran)", waited.Seconds())
	case proxied:
		topSource = "`top` reads every node's resource metrics twice, a second apart, through the API server's node proxy (no metrics-server runs), where kwok's nodes have an address the proxy reaches (`-kwok-address`)"
	default:
		topSource = "`top` is not timed: no metrics-server runs and the API server's node proxy does not reach kwok's nodes on 127.0.0.1"
	}
	if served || proxied {
		commands = slices.Insert(commands, 2, command{"top", []string{"top", name, "-n", ns}})
	}
	timed := func(what string, f func() error) error {
		before, err := clusterCPU(o.kubeconfig)
		if err != nil {
			return err
		}
		out = append(out, answers.Tries(what, f))
		used, err := cpuSince(o.kubeconfig, before)
		cpu = append(cpu, used)
		return err
	}
	for _, cmd := range commands {
		if err := timed(cmd.what, answers.Plugin(ctx, o.plugin, o.kubeconfig, cmd.args...)); err != nil {
			return nil, nil, "", err
		}
	}
	view, stop, err := answers.DashboardView(o.kubeconfig, ns, name)
	if err != nil {
		return nil, nil, "", err
	}
	defer stop()
	if err := timed("dashboard job view", view); err != nil {
		return nil, nil, "", err
	}
	return out, cpu, topSource, nil
}

// kwokNodesProxied reports whether the API server's node proxy reaches
// kwok's nodes: whether their address is not a loopback one, which the
// proxy refuses.
func kwokNodesProxied(ctx context.Context, c client.Client) (bool, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{"type": "kwok"}, client.Limit(1)); err != nil {
		return false, fmt.Errorf("listing kwok's nodes: %w", err)
	}
	if len(nodes.Items) == 0 {
		return false, errors.New("no kwok node")
	}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip := net.ParseIP(a.Address)
			return ip != nil && !ip.IsLoopback(), nil
		}
	}
	return false, nil
}

// metricsAPIServed reports whether the cluster serves the metrics API
// (metrics.k8s.io), where kubectl mpi top reads usage first.
func metricsAPIServed(ctx context.Context, c client.Client, ns string) (bool, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(podMetricsList)
	err := c.List(ctx, &list, client.InNamespace(ns), client.Limit(1))
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err), apierrors.IsServiceUnavailable(err):
		return false, nil
	}
	return false, fmt.Errorf("asking whether the metrics API is served: %w", err)
}

var podMetricsList = schema.GroupVersionKind{Group: "metrics.k8s.io", Version: "v1beta1", Kind: "PodMetricsList"}

// waitForPodMetrics waits until the metrics API serves the usage of every
// pod of job name (pods of them) and says how long that took.
func waitForPodMetrics(ctx context.Context, c client.Client, ns, name string, pods int) (time.Duration, error) {
	// Two scrapes of every node take 30 s; ten minutes is a cluster that
	// cannot scrape its nodes.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	served := 0
	for {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(podMetricsList)
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{api.LabelJobName: name}); err != nil {
			return 0, fmt.Errorf("listing the pod metrics of %s/%s: %w", ns, name, err)
		}
		if served = len(list.Items); served >= pods {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the metrics API served %d of %d pods' usage of %s/%s: %w", served, pods, ns, name, ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
}
