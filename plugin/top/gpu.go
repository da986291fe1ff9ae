package top

import (
	"context"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/exec"
)

// GPU is one GPU as nvidia-smi reports it in a rank's container.
type GPU struct {
	Index string `json:"index"`
	Name  string `json:"name"`
	// Utilization is the percentage of time a kernel ran over nvidia-smi's
	// last sample period.
	Utilization int `json:"utilizationPercent"`
	// MemoryUsed and MemoryTotal are in MiB.
	MemoryUsed  int64 `json:"memoryUsedMiB"`
	MemoryTotal int64 `json:"memoryTotalMiB"`
}

// nvidiaSMIQuery is the command that reads them: CSV with its header, whose
// names say which column is which, and units.
var nvidiaSMIQuery = []string{"nvidia-smi", "--query-gpu=index,name,utilization.gpu,memory.used,memory.total", "--format=csv"}

// Bounds of a GPU read: a node has at most a few dozen GPUs, a line each.
const (
	gpuOutputLimit = 16 << 10
	gpuReadTimeout = 10 * time.Second
	gpuReadsAtOnce = 8
)

// parseNvidiaSMI reads nvidia-smi's --query-gpu output in --format=csv:
// a header of the queried names, each with its unit in brackets, then a
// line per GPU. Columns are found by name, so any order or extra column
// reads the same.
func parseNvidiaSMI(out string) ([]GPU, error) {
	r := csv.NewReader(strings.NewReader(out))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading nvidia-smi's CSV: %w", err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("nvidia-smi printed nothing")
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		name, _, _ := strings.Cut(h, " [")
		col[strings.TrimSpace(name)] = i
	}
	for _, need := range []string{"index", "utilization.gpu", "memory.used", "memory.total"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("nvidia-smi's header %q has no %s", strings.Join(rows[0], ","), need)
		}
	}
	var gpus []GPU
	for _, row := range rows[1:] {
		field := func(name string) string {
			if i, ok := col[name]; ok && i < len(row) {
				return strings.TrimSpace(row[i])
			}
			return ""
		}
		util, err := number(field("utilization.gpu"), "%")
		if err != nil {
			return nil, err
		}
		used, err := number(field("memory.used"), "MiB")
		if err != nil {
			return nil, err
		}
		total, err := number(field("memory.total"), "MiB")
		if err != nil {
			return nil, err
		}
		gpus = append(gpus, GPU{Index: field("index"), Name: field("name"), Utilization: int(util), MemoryUsed: used, MemoryTotal: total})
	}
	return gpus, nil
}

// number reads a value nvidia-smi printed with its unit ("87 %", "512 MiB").
func number(v, unit string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, unit)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("nvidia-smi printed %q where a number of %s was due", v, unit)
	}
	return n, nil
}

// gpuReader reads the GPUs of a job's rank containers with nvidia-smi,
// which the NVIDIA container toolkit puts in containers given GPUs.
type gpuReader struct {
	Config *rest.Config
	Kube   kubernetes.Interface
}

// Read returns the GPUs of each running pod that asks for GPUs, by pod
// name; a pod whose GPUs cannot be read (no nvidia-smi, a container that
// does not run) is absent, never shown as idle.
func (r *gpuReader) Read(ctx context.Context, pods []corev1.Pod) map[string][]GPU {
	out := map[string][]GPU{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, gpuReadsAtOnce)
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || !asksGPUs(p) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(ctx, gpuReadTimeout)
			defer cancel()
			data, code, err := exec.Output(ctx, r.Config, r.Kube, p, mpi.TrainerContainer, nvidiaSMIQuery, gpuOutputLimit)
			if err != nil || code != 0 {
				return
			}
			gpus, err := parseNvidiaSMI(string(data))
			if err != nil {
				return
			}
			mu.Lock()
			out[p.Name] = gpus
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// asksGPUs reports whether a pod's rank container asks for GPUs.
func asksGPUs(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == mpi.TrainerContainer && mpi.GPUs(c.Resources.Limits) > 0 {
			return true
		}
	}
	return false
}

// gpuCells renders a pod's GPUs for top's table: each GPU's utilisation,
// and its memory in use of its total; "-" where they could not be read.
func gpuCells(gpus []GPU, read bool) (util, memory string) {
	if !read {
		return "-", "-"
	}
	u := make([]string, len(gpus))
	m := make([]string, len(gpus))
	for i, g := range gpus {
		u[i] = fmt.Sprintf("%d%%", g.Utilization)
		m[i] = fmt.Sprintf("%d/%dMi", g.MemoryUsed, g.MemoryTotal)
	}
	return strings.Join(u, ","), strings.Join(m, ",")
}
