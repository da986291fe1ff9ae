package diagnosis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/torus-mpi/torus/internal/corpus"
)

// gpuCorpus reads shared/corpus/gpu-failures: what GPU training programs
// printed when they failed, recorded on a real GPU, each file as the
// kubelet would keep it of a launcher's output.
func gpuCorpus(t *testing.T) map[string]string {
	t.Helper()
	dir := corpus.Dir("gpu-failures")
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no GPU failure corpus in %s (%v): it lives beside the repository, in shared/corpus", dir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = corpus.KubeletTail(corpus.Program(string(data)))
	}
	return out
}

// Each recorded failure reads as its cause, with the rank where the output
// names it, in the context of a job of 2 ranks on one GPU per worker.
func TestGPUCorpus(t *testing.T) {
	c := failureContext{job: "train", namespace: "team", logs: "kubectl mpi logs train --launcher", slots: 2, gpus: 1, gpuResource: "nvidia.com/gpu"}
	want := map[string]struct{ reason, detail, fixHas string }{
		"cuda-oom.txt": {ReasonCUDAOutOfMemory,
			"a rank ran out of GPU memory: it asked for 1024.00 GiB more on GPU 0, which had 139.29 GiB free of 139.80 GiB", "smaller batch"},
		"cuda-device-assert.txt": {ReasonCUDADeviceAssert,
			"an assertion in a CUDA kernel of a rank failed: index out of bounds", "CUDA_LAUNCH_BLOCKING=1"},
		"mpirun-rank-killed.txt": {ReasonRankKilled,
			"rank 1 on vm was killed by signal 9 (SIGKILL)", "OOM killer"},
		// Rank 0 held 630 MiB of the GPU rank 1 ran out of: ranks share it.
		"mpirun-rank-oom-then-hang.txt": {ReasonCUDAOutOfMemory,
			"a rank ran out of GPU memory: it asked for 16.00 GiB more on GPU 0, which had 10.56 GiB free of 139.80 GiB; another process held 630.00 MiB of that GPU",
			"the job runs 2 ranks per worker on 1 GPU, so give each rank its own (--slots-per-worker 1, or --gpus 2)"},
		// The kubelet's 2 KiB keep the end of rank 0's lines and all of
		// rank 1's; NCCL's words name both ranks.
		"nccl-duplicate-gpu.txt": {ReasonNCCLDuplicateGPU,
			"NCCL ranks 0 and 1 share one GPU (CUDA device 60); NCCL needs a GPU per rank", "make them equal (--slots-per-worker 1, or --gpus 2)"},
		"nccl-init-info-ok.txt": {},
		"torch-collective-timeout.txt": {ReasonCollectiveTimeout,
			"a recv of rank 0 timed out after 10 s: a peer never joined the collective", "another rank failed"},
		"torch-rendezvous-rank-missing.txt": {ReasonRendezvousTimeout,
			"the ranks' rendezvous timed out after 16 s with 1 of 2 ranks joined", "WORLD_SIZE"},
	}
	for name, out := range gpuCorpus(t) {
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			got := readOutput(out, c)
			if !ok {
				t.Logf("a recording this test does not know reads as %q: %s; quoting %q", got.reason, got.detail, got.quote)
				return
			}
			if got.reason != w.reason || got.detail != w.detail {
				t.Errorf("read as %q: %q\nwant %q: %q", got.reason, got.detail, w.reason, w.detail)
			}
			if !strings.Contains(got.fix, w.fixHas) {
				t.Errorf("fix %q does not say %q", got.fix, w.fixHas)
			}
			if w.reason != "" && len(got.quote) == 0 {
				t.Error("the line that names the failure is not quoted")
			}
		})
	}
}

// The cause is the same whatever else the launcher's output holds and in
// whatever order the ranks' lines reach it: another rank waiting in a
// collective, the launcher's verdict on a rank, a healthy rank's NCCL
// start-up, a Python exception that is another failure's echo.
func TestGPUCorpusFirstCause(t *testing.T) {
	files := gpuCorpus(t)
	c := failureContext{job: "train", namespace: "team", slots: 1, gpus: 1, gpuResource: "nvidia.com/gpu"}
	cases := map[string]struct {
		parts []string
		want  string
	}{
		"a rank out of memory, then another's collective timeout": {
			[]string{"cuda-oom.txt", "torch-collective-timeout.txt"}, ReasonCUDAOutOfMemory},
		"another's collective timeout, then a rank out of memory": {
			[]string{"torch-collective-timeout.txt", "cuda-oom.txt"}, ReasonCUDAOutOfMemory},
		"the launcher's verdict after a rank's device-side assert": {
			[]string{"cuda-device-assert.txt", "mpirun-rank-killed.txt"}, ReasonCUDADeviceAssert},
		"a rank killed, the others' rendezvous timing out after": {
			[]string{"torch-rendezvous-rank-missing.txt", "mpirun-rank-killed.txt"}, ReasonRankKilled},
		"healthy NCCL start-up before a duplicate GPU": {
			[]string{"nccl-init-info-ok.txt", "nccl-duplicate-gpu.txt"}, ReasonNCCLDuplicateGPU},
		"a rank out of memory while another waits in a barrier": {
			[]string{"mpirun-rank-oom-then-hang.txt", "torch-collective-timeout.txt", "mpirun-rank-killed.txt"}, ReasonCUDAOutOfMemory},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			for _, p := range tc.parts {
				out, ok := files[p]
				if !ok {
					t.Fatalf("the corpus has no %s", p)
				}
				b.WriteString(out)
			}
			// The launcher's output, as the kubelet keeps its end.
			if got := readOutput(corpus.KubeletTail(b.String()), c); got.reason != tc.want {
				t.Errorf("read as %q (%s), want %q", got.reason, got.detail, tc.want)
			}
		})
	}
}

// The recorded hang, a rank out of GPU memory while the other waits in a
// barrier, read as a running job's launcher output with the kubelet's
// timestamps: quiet since its last line, after that failure.
func TestGPUCorpusHang(t *testing.T) {
	out := gpuCorpus(t)["mpirun-rank-oom-then-hang.txt"]
	t0 := time.Date(2026, 11, 28, 21, 40, 0, 0, time.UTC)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	q := ReadQuiet(stamped(t0, lines...), launcherOf(false))
	if q.Reason != ReasonCUDAOutOfMemory || !strings.HasPrefix(q.Detail, "a rank ran out of GPU memory: it asked for 16.00 GiB") {
		t.Errorf("read as %q: %q", q.Reason, q.Detail)
	}
	if want := t0.Add(time.Duration(len(lines)-1) * time.Second); !q.LastOutput.Equal(want) {
		t.Errorf("last output at %v, want %v", q.LastOutput, want)
	}
}
