package top

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/job"
)

// A kubelet's /metrics/resource, trimmed.
const kubeletMetrics = `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="node",namespace="ns",pod="pi-node-0-0"} 10.5 1767225600000
container_cpu_usage_seconds_total{container="mpi-ssh-setup",namespace="ns",pod="pi-node-0-0"} 0.5 1767225600000
container_cpu_usage_seconds_total{container="main",namespace="ns",pod="kwok-0"} 4
container_memory_working_set_bytes{container="node",namespace="ns",pod="pi-node-0-0"} 1.048576e+08 1767225600000
container_memory_working_set_bytes{container="node",namespace="ns",pod="pi-launcher-0-0"} 2.097152e+07 1767225600000
pod_cpu_usage_seconds_total{namespace="ns",pod="pi-launcher-0-0"} 2 1767225600000
pod_memory_working_set_bytes{namespace="ns",pod="pi-launcher-0-0"} 3.145728e+07 1767225600000
scrape_error 0
`

func TestParse(t *testing.T) {
	answered := time.UnixMilli(1767225601500)
	at := time.UnixMilli(1767225600000)
	s, err := parse([]byte(kubeletMetrics), answered)
	if err != nil {
		t.Fatalf("parse() = %v", err)
	}
	wantCPU := map[string]map[string]point{
		"ns/pi-node-0-0":     {"node": {10.5, at}, "mpi-ssh-setup": {0.5, at}},
		"ns/pi-launcher-0-0": {"": {2, at}},
		"ns/kwok-0":          {"main": {4, answered}},
	}
	wantMem := map[string]float64{"ns/pi-node-0-0": 104857600, "ns/pi-launcher-0-0": 20971520}
	if diff := cmp.Diff(wantCPU, s.cpu, cmp.AllowUnexported(point{})); diff != "" {
		t.Errorf("cpu: by container, the pod's own series under \"\", at the kubelet's timestamp or else when answered (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMem, s.mem); diff != "" {
		t.Errorf("memory, the sum of the containers winning over the pod's own series (-want,+got):\n%s", diff)
	}
}

// A body that is not the Prometheus text format is an error, never a
// node without pods.
func TestParseRefusesWhatIsNotMetrics(t *testing.T) {
	for _, body := range []string{`m{a="x"} 2 soon`, "<html>proxy error</html>"} {
		if _, err := parse([]byte(body), time.Now()); err == nil {
			t.Errorf("parse(%q) succeeded", body)
		}
	}
}

func TestReadFromMetricsAPI(t *testing.T) {
	kube := fake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: "metrics.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "PodMetrics"}}}}
	mc := metricsfake.NewSimpleClientset()
	pm := &metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0", Namespace: "ns", Labels: map[string]string{"job": "pi"}},
		Containers: []metricsv1beta1.ContainerMetrics{
			{Name: "node", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("3Gi")}},
		},
	}
	// The metrics API's resource is "pods", not the plural Add would guess.
	gvr := metricsv1beta1.SchemeGroupVersion.WithResource("pods")
	if err := mc.Tracker().Create(gvr, pm, "ns"); err != nil {
		t.Fatal(err)
	}
	r := &usageReader{Kube: kube, Metrics: mc}
	listed := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0", Namespace: "ns"}}}
	pods, got, err := r.Read(context.Background(), "ns", "job=pi", func(context.Context) ([]corev1.Pod, error) { return listed, nil })
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	if len(pods) != 1 || pods[0].Name != "pi-node-0-0" {
		t.Errorf("Read() pods = %v, want those listed", pods)
	}
	u := got["pi-node-0-0"]
	if u.CPU.MilliValue() != 1500 || u.Memory.Value() != 3<<30 {
		t.Errorf("usage = %v CPU, %v memory; want 1500m, 3Gi", u.CPU.String(), u.Memory.String())
	}
	if r.Source() != sourceMetricsAPI {
		t.Errorf("Source() = %q, want %q", r.Source(), sourceMetricsAPI)
	}
}

func TestProxyMessage(t *testing.T) {
	if got := proxyMessage([]byte(`{"kind":"Status","message":"address not allowed"}`)); got != "address not allowed" {
		t.Errorf("proxyMessage(Status) = %q", got)
	}
	if got := proxyMessage([]byte("plain words\n")); got != "plain words" {
		t.Errorf("proxyMessage(text) = %q", got)
	}
}

// A pod whose CPU rate is not known yet (one sample of the kubelet's
// counter) shows <pending> CPU beside its memory, never 0m.
func TestPodTableCPU(t *testing.T) {
	pod := func(name string, index string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelRole: api.RoleWorker, batchv1.JobCompletionIndexAnnotation: index}},
			Spec:       corev1.PodSpec{NodeName: "n"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	pods := []corev1.Pod{pod("known", "0"), pod("pending", "1"), pod("unread", "2")}
	usage := map[string]podUsage{
		"known":   {CPU: resource.NewMilliQuantity(250, resource.DecimalSI), Memory: resource.MustParse("64Mi")},
		"pending": {Memory: resource.MustParse("64Mi")},
	}
	table := podTable(pods, mpi.Placement{}, usage, nil)
	var got [][2]any
	for _, r := range table.Rows {
		got = append(got, [2]any{r.Cells[4], r.Cells[6]})
	}
	want := [][2]any{{"250m", "64Mi"}, {"<pending>", "64Mi"}, {"<pending>", "<pending>"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CPU and memory cells (-want +got):\n%s", diff)
	}
}

// A host the glance saw plainly running shows as its row: its name and
// node, with what its role's pod read whole asks for.
func TestRunningPodRow(t *testing.T) {
	worker := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0-abcde", Namespace: "ns", Labels: map[string]string{api.LabelRole: api.RoleWorker, batchv1.JobCompletionIndexAnnotation: "0"}},
		Spec: corev1.PodSpec{NodeName: "n0", Containers: []corev1.Container{{Name: mpi.TrainerContainer, Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), "nvidia.com/gpu": resource.MustParse("1")},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	host := mpi.Host{Role: api.RoleWorker, ReplicatedJob: mpi.NodeJob, Index: 7}
	pods := []corev1.Pod{worker, runningPod(&worker, job.RunningPod{Name: "pi-node-0-7-fghij", Node: "n7"}, host)}
	placement := mpi.NewPlacement("pi", 8, 1, false)
	usage := map[string]podUsage{"pi-node-0-7-fghij": {CPU: resource.NewMilliQuantity(900, resource.DecimalSI), Memory: resource.MustParse("1Gi")}}
	table := podTable(pods, placement, usage, nil)
	if len(table.Rows) != 2 {
		t.Fatalf("rows = %d, want 2", len(table.Rows))
	}
	got := table.Rows[1].Cells[:9]
	want := []any{"worker-7", "7", "pi-node-0-7-fghij", "n7", "900m", "2", "1024Mi", "4Gi", "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the running host's row (-want +got):\n%s", diff)
	}
	if p := pods[1]; p.Namespace != "ns" || !asksGPUs(&p) {
		t.Errorf("running pod = %s/%s, asks GPUs %v; want ns/, true", p.Namespace, p.Name, asksGPUs(&p))
	}
}

// kubeletBodies serves a node's resource metrics, one body a scrape (the
// last one again once they run out), as the API server's node proxy
// passes them on, and counts the scrapes.
type kubeletBodies struct {
	mu      sync.Mutex
	bodies  []string
	scrapes int
}

func (k *kubeletBodies) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/api/v1/nodes/n1":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}`)
	case "/api/v1/nodes/n1/proxy/metrics/resource":
		k.mu.Lock()
		defer k.mu.Unlock()
		fmt.Fprint(w, k.bodies[min(k.scrapes, len(k.bodies)-1)])
		k.scrapes++
	default:
		http.NotFound(w, req)
	}
}

// A first read samples a node again until each of the job's pods has a
// rate, by the kubelet's timestamps, for RateWait at most and once more at
// least; a later read samples once. Pods of other namespaces on the node
// are not the job's.
func TestFromKubeletsSamplesUntilRates(t *testing.T) {
	series := func(cpu float64, ms int64) string {
		return fmt.Sprintf("pod_cpu_usage_seconds_total{namespace=\"ns\",pod=\"w\"} %v %d\n", cpu, ms) +
			fmt.Sprintf("pod_memory_working_set_bytes{namespace=\"ns\",pod=\"w\"} 1048576 %d\n", ms) +
			fmt.Sprintf("pod_cpu_usage_seconds_total{namespace=\"other\",pod=\"w\"} 1 %d\n", ms) +
			fmt.Sprintf("pod_memory_working_set_bytes{namespace=\"other\",pod=\"w\"} 2097152 %d\n", ms)
	}
	const t0 = 1767225600000
	unchanged := []string{series(10, t0), series(10, t0), series(10, t0)}
	moved := []string{series(10, t0), series(10, t0), series(12, t0+2000), series(13, t0+4000)}
	tests := []struct {
		name     string
		bodies   []string
		rateWait time.Duration
		scrapes  int
		cpu      string // "" is pending
		// later is a second read's CPU, with one scrape more.
		later string
	}{
		{name: "top: until the counter moves", bodies: moved, rateWait: 10 * time.Second, scrapes: 3, cpu: "1", later: "500m"},
		{name: "the dashboard: one sample more, then pending", bodies: moved, rateWait: 0, scrapes: 2, cpu: "", later: "1"},
		{name: "a counter that never moves: pending once RateWait passes", bodies: unchanged, rateWait: 50 * time.Millisecond, scrapes: -1, cpu: "", later: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kubelet := &kubeletBodies{bodies: tt.bodies}
			srv := httptest.NewServer(kubelet)
			defer srv.Close()
			kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			r := &usageReader{Kube: kube, Interval: 10 * time.Millisecond, RateWait: tt.rateWait}
			pods := []corev1.Pod{{
				ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"},
				Spec:       corev1.PodSpec{NodeName: "n1"},
				Status:     corev1.PodStatus{Phase: corev1.PodRunning},
			}}
			cpu := func(u map[string]podUsage) string {
				if u["w"].CPU == nil {
					return ""
				}
				return u["w"].CPU.String()
			}
			got, err := r.fromKubelets(context.Background(), pods)
			if err != nil {
				t.Fatalf("fromKubelets() = %v", err)
			}
			if w := got["w"]; len(got) != 1 || w.Memory.Value() != 1<<20 {
				t.Errorf("usage = %v; want w's alone, with 1Mi of memory", got)
			}
			if cpu(got) != tt.cpu {
				t.Errorf("CPU = %q, want %q", cpu(got), tt.cpu)
			}
			scrapes := kubelet.scrapes
			if tt.scrapes >= 0 && scrapes != tt.scrapes {
				t.Errorf("scrapes = %d, want %d", scrapes, tt.scrapes)
			}
			// However slow the machine, one sample more at least.
			if tt.scrapes < 0 && scrapes < 2 {
				t.Errorf("scrapes = %d: a counter that did not move was not sampled again", scrapes)
			}
			got, err = r.fromKubelets(context.Background(), pods)
			if err != nil {
				t.Fatalf("second fromKubelets() = %v", err)
			}
			if kubelet.scrapes != scrapes+1 {
				t.Errorf("a second read scraped %d times, want once", kubelet.scrapes-scrapes)
			}
			if cpu(got) != tt.later {
				t.Errorf("second read's CPU = %q, want %q", cpu(got), tt.later)
			}
		})
	}
}

func TestProxyPath(t *testing.T) {
	for _, tc := range []struct {
		name, annotated, want string
	}{
		{"a kubelet's own", "", "/api/v1/nodes/n1/proxy/metrics/resource"},
		{"kwok's per-node path", "/metrics/nodes/n1/metrics/resource", "/api/v1/nodes/n1/proxy/metrics/nodes/n1/metrics/resource"},
		{"without its leading slash", "metrics/nodes/n1/metrics/resource", "/api/v1/nodes/n1/proxy/metrics/nodes/n1/metrics/resource"},
		{"leaving the node's proxy", "/../../namespaces/default/secrets", "/api/v1/nodes/n1/proxy/metrics/resource"},
		{"a dot segment", "/metrics/./resource", "/api/v1/nodes/n1/proxy/metrics/resource"},
		{"an empty segment", "/metrics//resource", "/api/v1/nodes/n1/proxy/metrics/resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(proxyPath("n1", tc.annotated), "/"); got != tc.want {
				t.Errorf("proxyPath(n1, %q) = %q, want %q", tc.annotated, got, tc.want)
			}
		})
	}
}
