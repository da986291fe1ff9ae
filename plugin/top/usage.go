package top

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
)

// Usage is what one pod uses now, as top reads it.
type Usage struct {
	// CPU in millicores, absent until its rate is known (a pod's first
	// kubelet sample), and Memory in bytes.
	CPU    *int64 `json:"cpuMillis,omitempty"`
	Memory int64  `json:"memoryBytes"`
	// GPUs are the pod's GPUs as nvidia-smi read them in its rank
	// container; absent where they could not be read.
	GPUs []GPU `json:"gpus,omitempty"`
}

// Reader reads a job's pods' usage as top does: from metrics.k8s.io where
// it is served, else from the kubelets' resource metrics. One Reader kept
// across reads computes the kubelets' CPU rates between them.
type Reader struct {
	r    *usageReader
	gpus *gpuReader
}

// NewReader reads with the user's clients; cfg execs nvidia-smi. A first
// read of a node samples it twice, a second apart, and no more: a caller
// that reads again every few seconds gets the rates of counters that had
// not moved then from a later read.
func NewReader(cfg *rest.Config, kube kubernetes.Interface, metrics metricsclient.Interface) *Reader {
	return &Reader{r: &usageReader{Kube: kube, Metrics: metrics, Interval: time.Second, RateWait: time.Second}, gpus: &gpuReader{Config: cfg, Kube: kube}}
}

// Job reads a job's pods with listPods and the usage of those running, by
// pod name, and names where it came from.
func (r *Reader) Job(ctx context.Context, namespace, job string, listPods func(context.Context) ([]corev1.Pod, error)) ([]corev1.Pod, map[string]Usage, string, error) {
	pods, u, err := r.r.Read(ctx, namespace, api.LabelJobName+"="+job, listPods)
	if err != nil {
		return nil, nil, "", err
	}
	gpus := r.gpus.Read(ctx, pods)
	out := make(map[string]Usage, len(u))
	for name, p := range u {
		u := Usage{Memory: p.Memory.Value(), GPUs: gpus[name]}
		if p.CPU != nil {
			u.CPU = ptr.To(p.CPU.MilliValue())
		}
		out[name] = u
	}
	return pods, out, r.r.Source(), nil
}
