package top

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// A kubelet's /metrics/resource, trimmed.
const kubeletMetrics = `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="node",namespace="ns",pod="pi-node-0-0"} 10.5 1767225600000
container_cpu_usage_seconds_total{container="mpi-ssh-setup",namespace="ns",pod="pi-node-0-0"} 0.5 1767225600000
container_memory_working_set_bytes{container="node",namespace="ns",pod="pi-node-0-0"} 1.048576e+08 1767225600000
container_memory_working_set_bytes{container="node",namespace="ns",pod="pi-launcher-0-0"} 2.097152e+07 1767225600000
pod_cpu_usage_seconds_total{namespace="ns",pod="pi-launcher-0-0"} 2 1767225600000
pod_memory_working_set_bytes{namespace="ns",pod="pi-launcher-0-0"} 3.145728e+07 1767225600000
scrape_error 0
`

func TestParse(t *testing.T) {
	s := parse([]byte(kubeletMetrics))
	wantCPU := map[string]float64{"pi-node-0-0": 11, "pi-launcher-0-0": 2}
	wantMem := map[string]float64{"pi-node-0-0": 104857600, "pi-launcher-0-0": 31457280}
	if diff := cmp.Diff(wantCPU, s.cpu); diff != "" {
		t.Errorf("cpu (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMem, s.mem); diff != "" {
		t.Errorf("memory, the pod series winning over the sum of containers (-want,+got):\n%s", diff)
	}
}

func TestParseLine(t *testing.T) {
	name, labels, v, ok := parseLine(`m{a="x,y",b="z"} 1.5`)
	if !ok || name != "m" || v != 1.5 || labels["a"] != "x,y" || labels["b"] != "z" {
		t.Errorf("parseLine() = %q %v %v %v", name, labels, v, ok)
	}
	if _, _, _, ok := parseLine("garbage"); ok {
		t.Error("parseLine(garbage) succeeded")
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
	got, err := r.Read(context.Background(), "ns", "job=pi", nil)
	if err != nil {
		t.Fatalf("Read() = %v", err)
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
