// Package top is kubectl mpi top: the CPU and memory the pods of an MPI job
// use, beside what they requested, read from metrics.k8s.io when the cluster
// serves it (metrics-server), otherwise from the kubelets' resource metrics
// (/metrics/resource, the endpoint metrics-server itself scrapes) through
// the API server's node proxy.
package top

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// usageReader reads pod usage. It keeps the previous kubelet sample of each
// node, so that --watch computes CPU rates between successive reads.
type usageReader struct {
	Kube    kubernetes.Interface
	Metrics metricsclient.Interface
	// Interval separates the two kubelet samples of a first read.
	Interval time.Duration

	mu       sync.Mutex
	source   string
	previous map[string]sample
	// paths are each node's metrics path through the proxy, read from
	// the node once: a node does not change kind.
	paths map[string][]string
}

// Source is where the last read came from.
func (r *usageReader) Source() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.source
}

// Read returns the usage of the running pods, by pod name.
func (r *usageReader) Read(ctx context.Context, namespace, selector string, pods []corev1.Pod) (map[string]podUsage, error) {
	served, err := r.metricsAPIServed()
	if err != nil {
		return nil, err
	}
	if served {
		r.setSource(sourceMetricsAPI)
		return r.fromMetricsAPI(ctx, namespace, selector)
	}
	r.setSource(sourceKubelet)
	return r.fromKubelets(ctx, pods)
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

// sample is one scrape of a node's resource metrics.
type sample struct {
	at time.Time
	// cpu is cumulative CPU seconds by pod; mem the working set in bytes.
	cpu map[string]float64
	mem map[string]float64
}

func (r *usageReader) fromKubelets(ctx context.Context, pods []corev1.Pod) (map[string]podUsage, error) {
	nodes := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			nodes[p.Spec.NodeName] = true
		}
	}
	r.mu.Lock()
	if r.previous == nil {
		r.previous = map[string]sample{}
	}
	first := false
	for n := range nodes {
		if _, ok := r.previous[n]; !ok {
			first = true
		}
	}
	r.mu.Unlock()

	scrapeAll := func() (map[string]sample, error) {
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
		return out, nil
	}
	if first {
		// CPU usage is a rate: a first read needs two samples.
		before, err := scrapeAll()
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		for n, s := range before {
			r.previous[n] = s
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(r.Interval):
		}
	}
	now, err := scrapeAll()
	if err != nil {
		return nil, err
	}
	out := map[string]podUsage{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, s := range now {
		prev := r.previous[n]
		dt := s.at.Sub(prev.at).Seconds()
		for pod, mem := range s.mem {
			u := podUsage{Memory: *resource.NewQuantity(int64(mem), resource.BinarySI)}
			if c0, ok := prev.cpu[pod]; ok && dt > 0 {
				if c1, ok := s.cpu[pod]; ok && c1 >= c0 {
					u.CPU = resource.NewMilliQuantity(int64((c1-c0)/dt*1000), resource.DecimalSI)
				}
			}
			out[pod] = u
		}
		r.previous[n] = s
	}
	return out, nil
}

// scrape reads a node's resource metrics through the API server. Nodes
// simulated by kwok serve them per node under /metrics/nodes/<node>/, as
// all of them share one address.
func (r *usageReader) scrape(ctx context.Context, node string) (sample, error) {
	path, err := r.metricsPath(ctx, node)
	if err != nil {
		return sample{}, err
	}
	at := time.Now()
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
	s := parse(data)
	s.at = at
	return s, nil
}

// metricsPath is where the API server's node proxy serves a node's
// resource metrics: the kubelet's /metrics/resource, or kwok's per-node
// path for the nodes it simulates.
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
	path = []string{"/api/v1/nodes", node, "proxy", "metrics", "resource"}
	if n.Annotations["kwok.x-k8s.io/node"] == "fake" {
		path = []string{"/api/v1/nodes", node, "proxy", "metrics", "nodes", node, "metrics", "resource"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paths == nil {
		r.paths = map[string][]string{}
	}
	r.paths[node] = path
	return path, nil
}

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

// parse reads the Prometheus text of /metrics/resource: pod-level series
// when present, else the sum of the pod's containers.
func parse(data []byte) sample {
	s := sample{cpu: map[string]float64{}, mem: map[string]float64{}}
	podCPU, podMem := map[string]float64{}, map[string]float64{}
	ctrCPU, ctrMem := map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := parseLine(line)
		if !ok {
			continue
		}
		key := labels["namespace"] + "/" + labels["pod"]
		switch name {
		case "pod_cpu_usage_seconds_total":
			podCPU[key] = value
		case "pod_memory_working_set_bytes":
			podMem[key] = value
		case "container_cpu_usage_seconds_total":
			ctrCPU[key] += value
		case "container_memory_working_set_bytes":
			ctrMem[key] += value
		}
	}
	pick := func(dst, pod, ctr map[string]float64) {
		for k, v := range ctr {
			dst[podName(k)] = v
		}
		for k, v := range pod {
			dst[podName(k)] = v
		}
	}
	pick(s.cpu, podCPU, ctrCPU)
	pick(s.mem, podMem, ctrMem)
	return s
}

func podName(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}

// parseLine reads `name{a="b",c="d"} value [timestamp]`.
func parseLine(line string) (name string, labels map[string]string, value float64, ok bool) {
	labels = map[string]string{}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		name = line[:i]
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, false
		}
		for _, kv := range splitLabels(line[i+1 : j]) {
			k, v, found := strings.Cut(kv, "=")
			if found {
				labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
		rest = line[j+1:]
	} else {
		sp := strings.IndexByte(line, ' ')
		if sp < 0 {
			return "", nil, 0, false
		}
		name, rest = line[:sp], line[sp:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

// splitLabels splits on commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
