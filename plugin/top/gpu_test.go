package top

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torus-mpi/torus/internal/corpus"
)

// What nvidia-smi printed on a real H200, and the same columns as other
// drivers may order them or fail to read them.
func TestParseNvidiaSMI(t *testing.T) {
	recorded, err := os.ReadFile(filepath.Join(corpus.Dir("gpu-failures"), "nvidia-smi-query-gpu.csv"))
	if err != nil {
		t.Fatalf("the recorded nvidia-smi output lives beside the repository, in shared/corpus: %v", err)
	}
	cases := map[string]struct {
		out     string
		want    []GPU
		wantErr bool
	}{
		"recorded on an H200, with more columns than top asks for": {out: string(recorded),
			want: []GPU{{Index: "0", Name: "NVIDIA H200", Utilization: 0, MemoryUsed: 0, MemoryTotal: 143771}}},
		"two GPUs, columns in another order": {
			out: "memory.total [MiB], utilization.gpu [%], index, memory.used [MiB], name\n81559 MiB, 87 %, 0, 61234 MiB, NVIDIA A100-SXM4-80GB\n81559 MiB, 93 %, 1, 60000 MiB, NVIDIA A100-SXM4-80GB\n",
			want: []GPU{
				{Index: "0", Name: "NVIDIA A100-SXM4-80GB", Utilization: 87, MemoryUsed: 61234, MemoryTotal: 81559},
				{Index: "1", Name: "NVIDIA A100-SXM4-80GB", Utilization: 93, MemoryUsed: 60000, MemoryTotal: 81559},
			}},
		"a value the driver cannot read": {out: "index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n0, [N/A], 10 MiB, 80 MiB\n", wantErr: true},
		"not nvidia-smi's CSV":           {out: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", wantErr: true},
		"nothing":                        {out: "", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseNvidiaSMI(tc.out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
		})
	}
}

// A pod's GPUs read as each one's use; one not read shows "-", not idle.
func TestGPUCells(t *testing.T) {
	gpus := []GPU{{Index: "0", Utilization: 87, MemoryUsed: 61234, MemoryTotal: 81559}, {Index: "1", Utilization: 0, MemoryUsed: 0, MemoryTotal: 81559}}
	if u, m := gpuCells(gpus, true); u != "87%,0%" || m != "61234/81559Mi,0/81559Mi" {
		t.Errorf("read: %q %q", u, m)
	}
	if u, m := gpuCells(nil, false); u != "-" || m != "-" {
		t.Errorf("not read: %q %q", u, m)
	}
}
