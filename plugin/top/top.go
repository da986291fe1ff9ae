// Package top is kubectl mpi top: the CPU and memory the pods of an MPI job
// use, beside what they requested, read from metrics.k8s.io when the cluster
// serves it (metrics-server), otherwise from the kubelets' resource metrics
// (/metrics/resource, the endpoint metrics-server itself scrapes) through
// the API server's node proxy.
package top

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// podUsage is what a pod uses now. CPU is nil until its rate is known:
// the kubelets' CPU is a counter, and a pod with one sample of it (new
// since the last read, or missing from the first scrape) has no rate yet.
type podUsage struct {
	CPU    *resource.Quantity
	Memory resource.Quantity
}

// Source names where usage came from, for people.
const (
	sourceMetricsAPI = "metrics.k8s.io"
	sourceKubelet    = "kubelet resource metrics through the API server's node proxy"
)

// usageReader reads pod usage. From the kubelets it keeps each pod's last
// CPU counter and the rate last computed from it, so that reads kept across
// (--watch, the dashboard) show a pod's rate between the kubelet's updates
// of its counter.
type usageReader struct {
	Kube    kubernetes.Interface
	Metrics metricsclient.Interface
	// Interval separates the kubelet samples of a first read.
	Interval time.Duration
	// RateWait bounds how long a first read samples the kubelets again
	// for each pod's CPU counter to move, after one sample more at
	// least: rateWait for a single answer, less for a reader whose
	// caller reads again soon (the dashboard).
	RateWait time.Duration

	mu     sync.Mutex
	source string
	// nodes are the nodes sampled within forgetAfter, each with its
	// pods' CPU counters. A read that meets a node not among them waits
	// for its pods' rates.
	nodes map[string]*nodeCounters
	// paths are each node's metrics path through the proxy, read from
	// the node once: a node does not change kind.
	paths map[string][]string
}

// nodeCounters are a node's pods' CPU counters, as of its newest sample.
type nodeCounters struct {
	// answered is when that sample was answered.
	answered time.Time
	// pods are, by pod (namespace/name) and series, the counter as last
	// sampled and the rate last computed from it: the pods of that
	// sample alone.
	pods map[string]map[string]*counter
}

// forgetAfter is how long a node's counters are kept unread: a rate from a
// point older than that would be an average over a past no longer asked
// for, and a node read no more (gone, or of a job no longer watched) costs
// memory for nothing.
const forgetAfter = time.Minute

// minRateWindow is the shortest time between two points of a counter that
// gives it a rate: two reads a few milliseconds apart (two dashboard views
// of jobs on one node) would give one from the counters' jitter alone.
const minRateWindow = 500 * time.Millisecond

// rateWait is how long a first read waits at most for the kubelets' CPU
// counters to move: a kubelet's counter of a pod's own comes from cAdvisor,
// which refreshes it every 10 s or so (its housekeeping), and is served
// with the same value and timestamp in between.
const rateWait = 15 * time.Second

// Source is where the last read came from.
func (r *usageReader) Source() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.source
}

// Read returns the pods listPods reads and the usage of those running, by
// pod name. From the metrics API, which needs no pod to be read first, the
// pods and their usage are read at once.
func (r *usageReader) Read(ctx context.Context, namespace, selector string, listPods func(context.Context) ([]corev1.Pod, error)) ([]corev1.Pod, map[string]podUsage, error) {
	var (
		pods   []corev1.Pod
		usage  map[string]podUsage
		served bool
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		pods, err = listPods(gctx)
		return err
	})
	g.Go(func() (err error) {
		if served, err = r.metricsAPIServed(); err != nil || !served {
			return err
		}
		usage, err = r.fromMetricsAPI(gctx, namespace, selector)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if served {
		r.setSource(sourceMetricsAPI)
		return pods, usage, nil
	}
	r.setSource(sourceKubelet)
	usage, err := r.fromKubelets(ctx, pods)
	return pods, usage, err
}

func (r *usageReader) setSource(s string) {
	r.mu.Lock()
	r.source = s
	r.mu.Unlock()
}

func (r *usageReader) metricsAPIServed() (bool, error) {
	_, err := r.Kube.Discovery().ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1")
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsForbidden(err):
		return false, nil
	}
	return false, fmt.Errorf("looking for metrics.k8s.io: %w", err)
}

func (r *usageReader) fromMetricsAPI(ctx context.Context, namespace, selector string) (map[string]podUsage, error) {
	list, err := r.Metrics.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("reading pod metrics from metrics.k8s.io: %w", err)
	}
	out := map[string]podUsage{}
	for _, pm := range list.Items {
		u := podUsage{CPU: &resource.Quantity{}}
		for _, c := range pm.Containers {
			u.CPU.Add(c.Usage[corev1.ResourceCPU])
			u.Memory.Add(c.Usage[corev1.ResourceMemory])
		}
		out[pm.Name] = u
	}
	return out, nil
}

// point is one value of a cumulative CPU counter, in core-seconds, and
// when it was taken: the kubelet's own timestamp, or where a series has
// none (kwok's), when the scrape was answered.
type point struct {
	v  float64
	at time.Time
}

// sample is one scrape of a node's resource metrics.
type sample struct {
	// answered is when the scrape was answered.
	answered time.Time
	// cpu is, by pod, its CPU counters: one per container, and the
	// pod's own under "".
	cpu map[string]map[string]point
	// mem is each pod's working set in bytes.
	mem map[string]float64
}

// counter is a CPU counter as a reader follows it: its last point, and the
// rate between the two last points that differed in time.
type counter struct {
	last  point
	rate  float64
	known bool
}

// observe follows a pod's counters with a new sample of them. A point no
// newer than the last one (the kubelet serves its counters unchanged
// between its updates), or newer by less than minRateWindow, leaves the
// counter and its rate as they were; a
// counter that went down (its container restarted) has no rate until its
// next point. Series the sample no longer has are dropped.
func observe(counters map[string]*counter, points map[string]point) map[string]*counter {
	out := make(map[string]*counter, len(points))
	for series, p := range points {
		c, ok := counters[series]
		if !ok {
			out[series] = &counter{last: p}
			continue
		}
		out[series] = c
		if p.at.Sub(c.last.at) < minRateWindow {
			continue
		}
		c.known = p.v >= c.last.v
		if c.known {
			c.rate = (p.v - c.last.v) / p.at.Sub(c.last.at).Seconds()
		}
		c.last = p
	}
	return out
}

// rate is a pod's CPU in cores: the sum of its containers' rates, as
// metrics-server gives it, when each one is known, else the rate of the
// pod's own series. A kubelet serves its containers' counters as the
// container runtime reads them at each scrape, and the pod's own from
// cAdvisor, which refreshes it every 10 s or so.
func rate(counters map[string]*counter, points map[string]point) (float64, bool) {
	sum, containers := 0.0, 0
	for series := range points {
		if series == "" {
			continue
		}
		c, ok := counters[series]
		if !ok || !c.known {
			containers = -1
			break
		}
		sum += c.rate
		containers++
	}
	if containers > 0 {
		return sum, true
	}
	if c, ok := counters[""]; ok && c.known {
		if _, ok := points[""]; ok {
			return c.rate, true
		}
	}
	return 0, false
}

// fromKubelets reads the usage of the running pods among pods from their
// nodes' kubelets.
func (r *usageReader) fromKubelets(ctx context.Context, pods []corev1.Pod) (map[string]podUsage, error) {
	nodes := map[string]bool{}
	wanted := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			nodes[p.Spec.NodeName] = true
			wanted[p.Namespace+"/"+p.Name] = p.Name
		}
	}
	start := time.Now()
	r.mu.Lock()
	for n, c := range r.nodes {
		if start.Sub(c.answered) > forgetAfter {
			delete(r.nodes, n)
		}
	}
	first := false
	for n := range nodes {
		_, ok := r.nodes[n]
		first = first || !ok
	}
	r.mu.Unlock()

	latest, err := r.scrapeAll(ctx, nodes)
	if err != nil {
		return nil, err
	}
	// CPU usage is a rate: a first read samples the nodes again, those
	// with a wanted pod whose counter has not moved yet, once at least
	// and then until each has or RateWait passes.
	deadline := start.Add(r.RateWait)
	for again := 0; first && (again == 0 || !time.Now().Add(r.Interval).After(deadline)); again++ {
		pending := map[string]bool{}
		for n, s := range latest {
			if len(r.usage(n, s, wanted, nil)) > 0 {
				pending[n] = true
			}
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(r.Interval):
		}
		samples, err := r.scrapeAll(ctx, pending)
		if err != nil {
			return nil, err
		}
		maps.Copy(latest, samples)
	}
	out := map[string]podUsage{}
	for n, s := range latest {
		r.usage(n, s, wanted, out)
	}
	return out, nil
}

// scrapeAll samples nodes at once, and follows their pods' counters.
func (r *usageReader) scrapeAll(ctx context.Context, nodes map[string]bool) (map[string]sample, error) {
	out := map[string]sample{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := r.scrape(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[n] = s
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		err := errs[0]
		if len(errs) > 1 {
			err = fmt.Errorf("%w (and %d more nodes)", err, len(errs)-1)
		}
		return nil, fmt.Errorf("cannot read pod usage: metrics.k8s.io is not served in this cluster (install metrics-server), and the fallback failed: %w", err)
	}
	for n, s := range out {
		r.follow(n, s)
	}
	return out, nil
}

// follow takes a node's new sample into its pods' counters, and forgets
// the pods the node no longer runs. Samples of a node read at once (two
// dashboard views) may be answered out of order: one older than the
// node's newest changes nothing.
func (r *usageReader) follow(node string, s sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.nodes[node]
	if old != nil && !s.answered.After(old.answered) {
		return
	}
	now := &nodeCounters{answered: s.answered, pods: make(map[string]map[string]*counter, len(s.cpu))}
	for pod, points := range s.cpu {
		var counters map[string]*counter
		if old != nil {
			counters = old.pods[pod]
		}
		now.pods[pod] = observe(counters, points)
	}
	if r.nodes == nil {
		r.nodes = map[string]*nodeCounters{}
	}
	r.nodes[node] = now
}

// usage puts, into out (when not nil), the usage a node's sample shows of
// the wanted pods (by namespace/name, each its name), and returns those
// of them whose CPU rate is not known yet.
func (r *usageReader) usage(node string, s sample, wanted map[string]string, out map[string]podUsage) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pending []string
	for pod, mem := range s.mem {
		name, ok := wanted[pod]
		if !ok {
			continue
		}
		u := podUsage{Memory: *resource.NewQuantity(int64(mem), resource.BinarySI)}
		var counters map[string]*counter
		if c := r.nodes[node]; c != nil {
			counters = c.pods[pod]
		}
		if cores, ok := rate(counters, s.cpu[pod]); ok {
			u.CPU = resource.NewMilliQuantity(int64(cores*1000), resource.DecimalSI)
		} else {
			pending = append(pending, name)
		}
		if out != nil {
			out[name] = u
		}
	}
	return pending
}

// scrape reads a node's resource metrics through the API server. Nodes
// simulated by kwok serve them per node under /metrics/nodes/<node>/, as
// all of them share one address.
func (r *usageReader) scrape(ctx context.Context, node string) (sample, error) {
	path, err := r.metricsPath(ctx, node)
	if err != nil {
		return sample{}, err
	}
	data, err := r.Kube.CoreV1().RESTClient().Get().AbsPath(path...).DoRaw(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return sample{}, fmt.Errorf("reading node %s's kubelet resource metrics through the API server's node proxy needs get on nodes/proxy: %w", node, err)
		}
		if msg := proxyMessage(data); msg != "" {
			// The proxy's own words, which the client could not decode.
			err = fmt.Errorf("%s", msg)
		}
		if strings.Contains(err.Error(), "address not allowed") {
			return sample{}, fmt.Errorf("the API server will not proxy to node %s: its address is a loopback one (as on a kwok cluster), which the node proxy refuses (%v)", node, err)
		}
		return sample{}, fmt.Errorf("reading node %s's kubelet resource metrics through the API server's node proxy: %w", node, err)
	}
	s, err := parse(data, time.Now())
	if err != nil {
		return sample{}, fmt.Errorf("reading node %s's kubelet resource metrics: %w", node, err)
	}
	return s, nil
}

// metricsPath is where the API server's node proxy serves a node's
// resource metrics: the kubelet's /metrics/resource, or the path the
// node's annotation metrics.k8s.io/resource-metrics-path names, as
// metrics-server reads it (kwok's simulated nodes carry one).
func (r *usageReader) metricsPath(ctx context.Context, node string) ([]string, error) {
	r.mu.Lock()
	path, ok := r.paths[node]
	r.mu.Unlock()
	if ok {
		return path, nil
	}
	n, err := r.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", node, err)
	}
	path = proxyPath(node, n.Annotations[resourceMetricsPath])
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paths == nil {
		r.paths = map[string][]string{}
	}
	r.paths[node] = path
	return path, nil
}

// proxyPath is the node proxy's path to a node's resource metrics at
// annotated (the node's metrics.k8s.io/resource-metrics-path), or at the
// kubelet's /metrics/resource where it names none or a path that would
// leave the node's proxy ("..").
func proxyPath(node, annotated string) []string {
	path := []string{"/api/v1/nodes", node, "proxy"}
	segments := strings.Split(strings.Trim(annotated, "/"), "/")
	for _, s := range segments {
		if s == "" || s == "." || s == ".." {
			return append(path, "metrics", "resource")
		}
	}
	return append(path, segments...)
}

// resourceMetricsPath is the node annotation that moves a node's resource
// metrics from the kubelet's /metrics/resource (metrics-server's name).
const resourceMetricsPath = "metrics.k8s.io/resource-metrics-path"

// proxyMessage reads the message of a node proxy's error response: a
// Status, or plain text.
func proxyMessage(body []byte) string {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	if msg := strings.TrimSpace(string(body)); len(msg) < 512 {
		return msg
	}
	return ""
}

// parse reads the Prometheus text of /metrics/resource, keyed by pod
// (namespace/name): each pod's CPU counters by container, and its own
// under "", and its memory, the sum of its containers' working sets where
// the kubelet names any, else its own. A series without a timestamp, as
// kwok serves them, is taken at answered.
func parse(data []byte, answered time.Time) (sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return sample{}, fmt.Errorf("parsing the kubelet's resource metrics: %w", err)
	}
	s := sample{answered: answered, cpu: map[string]map[string]point{}, mem: map[string]float64{}}
	type series struct {
		pod, container string
		point
	}
	read := func(name string) []series {
		var out []series
		for _, m := range families[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			at := answered
			if m.TimestampMs != nil {
				at = time.UnixMilli(m.GetTimestampMs())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			out = append(out, series{pod: labels["namespace"] + "/" + labels["pod"], container: labels["container"], point: point{v: v, at: at}})
		}
		return out
	}
	cpu := func(pod, series string, p point) {
		if s.cpu[pod] == nil {
			s.cpu[pod] = map[string]point{}
		}
		s.cpu[pod][series] = p
	}
	for _, c := range read("container_cpu_usage_seconds_total") {
		cpu(c.pod, c.container, c.point)
	}
	for _, p := range read("pod_cpu_usage_seconds_total") {
		cpu(p.pod, "", p.point)
	}
	for _, p := range read("pod_memory_working_set_bytes") {
		s.mem[p.pod] = p.v
	}
	containers := map[string]float64{}
	for _, c := range read("container_memory_working_set_bytes") {
		containers[c.pod] += c.v
	}
	maps.Copy(s.mem, containers)
	return s, nil
}

// NewMetricsClient is the metrics API's client, asking for protobuf: a
// job's PodMetrics list is read in about three fifths of JSON's time
// (4,097 pods from metrics-server, 2 cores), and a server that does not
// serve protobuf answers JSON.
func NewMetricsClient(cfg *rest.Config) (metricsclient.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the metrics client: %w", err)
	}
	return c, nil
}
