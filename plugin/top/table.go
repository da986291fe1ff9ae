package top

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/job"
)

// podTable is the table of kubectl mpi top: per launcher and worker pod its
// ranks, node, CPU and memory in use against what it requested, and its
// GPUs: how many, and each one's utilisation and memory where nvidia-smi
// could read them.
func podTable(pods []corev1.Pod, placement mpi.Placement, usage map[string]podUsage, gpus map[string][]GPU) *metav1.Table {
	t := &metav1.Table{
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Host", Type: "string"},
			{Name: "Ranks", Type: "string"},
			{Name: "Pod", Type: "string", Format: "name"},
			{Name: "Node", Type: "string"},
			{Name: "CPU", Type: "string", Description: "cores in use"},
			{Name: "CPU Request", Type: "string"},
			{Name: "Memory", Type: "string", Description: "working set"},
			{Name: "Memory Limit", Type: "string"},
			{Name: "GPUs", Type: "string", Description: "requested"},
			{Name: "GPU Util", Type: "string", Description: "each GPU's utilisation, from nvidia-smi in the rank's container"},
			{Name: "GPU Memory", Type: "string", Description: "each GPU's memory in use of its total"},
		},
	}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		h := job.HostOf(p)
		ranks := "-"
		if first, last, ok := placement.Ranks(h.Role, h.Index); ok {
			ranks = fmt.Sprint(first)
			if last != first {
				ranks = fmt.Sprintf("%d-%d", first, last)
			}
		}
		cpu, mem := "<pending>", "<pending>"
		if u, ok := usage[p.Name]; ok {
			if u.CPU != nil {
				cpu = fmt.Sprintf("%dm", u.CPU.MilliValue())
			}
			mem = fmt.Sprintf("%dMi", u.Memory.Value()/(1024*1024))
		}
		req, lim := podResources(p)
		g, read := gpus[p.Name]
		gpuUtil, gpuMem := gpuCells(g, read)
		node := p.Spec.NodeName
		if node == "" {
			node = "<none>"
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{
				h.Name(), ranks, p.Name, node,
				cpu, quantity(req, corev1.ResourceCPU), mem, quantity(lim, corev1.ResourceMemory),
				fmt.Sprint(mpi.GPUs(lim) + gpusOnlyRequested(req, lim)), gpuUtil, gpuMem,
			},
			Object: runtime.RawExtension{Object: p},
		})
	}
	return t
}

func podResources(p *corev1.Pod) (req, lim corev1.ResourceList) {
	req, lim = corev1.ResourceList{}, corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for n, q := range c.Resources.Requests {
			sum := req[n]
			sum.Add(q)
			req[n] = sum
		}
		for n, q := range c.Resources.Limits {
			sum := lim[n]
			sum.Add(q)
			lim[n] = sum
		}
	}
	return req, lim
}

// gpusOnlyRequested counts GPUs requested without a limit (the API server
// requires both for extended resources, so usually none).
func gpusOnlyRequested(req, lim corev1.ResourceList) int64 {
	extra := corev1.ResourceList{}
	for n, q := range req {
		if _, ok := lim[n]; !ok {
			extra[n] = q
		}
	}
	return mpi.GPUs(extra)
}

func quantity(rl corev1.ResourceList, name corev1.ResourceName) string {
	q, ok := rl[name]
	if !ok {
		return "-"
	}
	return q.String()
}
