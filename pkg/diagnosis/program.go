package diagnosis

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Reasons for failures a training program prints: CUDA, NCCL and PyTorch's
// distributed runtime, and Python itself.
const (
	// ReasonCUDAOutOfMemory: a rank asked a GPU for more memory than it had.
	ReasonCUDAOutOfMemory = "CUDAOutOfMemory"
	// ReasonCUDADeviceAssert: an assertion inside a CUDA kernel failed.
	ReasonCUDADeviceAssert = "CUDADeviceAssert"
	// ReasonNoGPUVisible: a rank's container sees no GPU.
	ReasonNoGPUVisible = "NoGPUVisible"
	// ReasonInvalidGPUDevice: a rank chose a GPU its container does not have.
	ReasonInvalidGPUDevice = "InvalidGPUDevice"
	// ReasonNCCLDuplicateGPU: two NCCL ranks of one communicator share a GPU.
	ReasonNCCLDuplicateGPU = "NCCLDuplicateGPU"
	// ReasonNCCLNoSocketInterface: NCCL found no interface to bootstrap over.
	ReasonNCCLNoSocketInterface = "NCCLNoSocketInterface"
	// ReasonNCCLError: NCCL failed, in its own words.
	ReasonNCCLError = "NCCLError"
	// ReasonNCCLPeerLost: NCCL lost a peer rank, which failed first.
	ReasonNCCLPeerLost = "NCCLPeerLost"
	// ReasonRendezvousTimeout: not every rank joined the rendezvous in time.
	ReasonRendezvousTimeout = "RendezvousTimeout"
	// ReasonCollectiveTimeout: a collective operation timed out.
	ReasonCollectiveTimeout = "CollectiveTimeout"
	// ReasonPythonException: the program raised an exception no other
	// reason explains.
	ReasonPythonException = "PythonException"
)

// Sizes as PyTorch prints them: "16.00 GiB", "20.00 MiB".
const size = `[0-9.]+ [KMGTP]?i?B`

var (
	oomAsked = regexp.MustCompile(`Tried to allocate (` + size + `)`)
	// PyTorch 2.1 and later; PyTorch 1.x and 2.0 print the second form.
	oomGPU    = regexp.MustCompile(`GPU ([0-9]+) has a total capacity of (` + size + `) of which (` + size + `) is free`)
	oomGPUOld = regexp.MustCompile(`\(GPU ([0-9]+); (` + size + `) total capacity;.*?(` + size + `) free`)
	// Another process holds memory on the same GPU, often another rank.
	oomOther = regexp.MustCompile(`Process [0-9]+ has (` + size + `) memory in use`)
	// An assertion's message, as a kernel's source quotes it.
	assertMessage = regexp.MustCompile(`"([^"]+)"`)
)

// programFailures are what training programs print when they fail: CUDA,
// NCCL and PyTorch's distributed runtime.
var programFailures = []outputFailure{
	{
		reason:  ReasonCUDAOutOfMemory,
		weight:  own,
		program: true,
		examples: []string{
			`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 6.19 GiB is free. Including non-PyTorch memory, this process has 73.05 GiB memory in use.`,
			`RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.46 GiB already allocated; 3.19 MiB free; 14.68 GiB reserved in total by PyTorch)`,
			`RuntimeError: CUDA error: out of memory`,
		},
		match: regexp.MustCompile(`CUDA out of memory.*|CUDA error: out of memory`),
		explain: func(m []string, c failureContext) (string, string) {
			detail := c.who() + " ran out of GPU memory"
			if a := oomAsked.FindStringSubmatch(m[0]); a != nil {
				detail += ": it asked for " + a[1] + " more"
				g := oomGPU.FindStringSubmatch(m[0])
				if g == nil {
					if old := oomGPUOld.FindStringSubmatch(m[0]); old != nil {
						g = old
					}
				}
				if g != nil {
					detail += fmt.Sprintf(" on GPU %s, which had %s free of %s", g[1], g[3], g[2])
				}
			}
			fix := "lower the memory a rank needs (a smaller batch, mixed precision, activation checkpointing, or a model sharded with FSDP or DeepSpeed ZeRO) or spread the work over more GPUs; when much is reserved but unallocated, --env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps"
			if o := oomOther.FindStringSubmatch(m[0]); o != nil {
				detail += "; another process held " + o[1] + " of that GPU"
				if c.gpus > 0 && int64(c.slots) > c.gpus {
					fix = fmt.Sprintf("ranks share GPUs: the job runs %d ranks per worker on %d %s, so give each rank its own (--slots-per-worker %d, or --gpus %d); otherwise %s",
						c.slots, c.gpus, gpuNoun(c.gpus), c.gpus, c.slots, fix)
				}
			}
			return detail, fix
		},
	},
	{
		reason:  ReasonCUDADeviceAssert,
		weight:  own,
		program: true,
		examples: []string{
			`/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] Assertion ` + "`t >= 0 && t < n_classes`" + ` failed.`,
			`torch.AcceleratorError: CUDA error: device-side assert triggered`,
		},
		match: regexp.MustCompile(`block: \[[0-9,]+\], thread: \[[0-9,]+\] Assertion (.*) failed|device-side assert(?:ion)? triggered`),
		explain: func(m []string, c failureContext) (string, string) {
			detail := "an assertion in a CUDA kernel of " + c.who() + " failed"
			if msg := assertMessage.FindStringSubmatch(m[1]); msg != nil {
				detail += ": " + bounded(msg[1])
			} else if m[1] != "" {
				detail += ": " + bounded(strings.Trim(m[1], "`'"))
			}
			return detail, "a kernel was given a value outside its range, most often an index or a class label (labels must be below the number of classes); --env CUDA_LAUNCH_BLOCKING=1 makes the error name the operation that failed"
		},
	},
	{
		reason:  ReasonNoGPUVisible,
		weight:  own,
		program: true,
		examples: []string{
			`RuntimeError: No CUDA GPUs are available`,
			`torch.AcceleratorError: CUDA error: no CUDA-capable device is detected`,
			`RuntimeError: Found no NVIDIA driver on your system.`,
		},
		match: regexp.MustCompile(`No CUDA GPUs are available|no CUDA-capable device is detected|Found no NVIDIA driver on your system|CUDA driver initialization failed`),
		explain: func(m []string, c failureContext) (string, string) {
			detail := c.who() + " sees no GPU"
			if c.gpus == 0 {
				return detail + ": the job asks for none", "ask for GPUs per worker (kubectl mpi run --gpus N, or the runtime's resourcesPerNode), on nodes whose device plugin serves them (kubectl mpi doctor)"
			}
			return fmt.Sprintf("%s, though each worker was given %d %s (%s)", detail, c.gpus, gpuNoun(c.gpus), c.gpuResource),
				"the node's device plugin and the NVIDIA container toolkit must hand the GPUs to the container (kubectl mpi doctor), the image needs the CUDA runtime, and CUDA_VISIBLE_DEVICES, if the image or program sets it, must not hide them"
		},
	},
	{
		reason:   ReasonInvalidGPUDevice,
		weight:   own,
		program:  true,
		examples: []string{`torch.AcceleratorError: CUDA error: invalid device ordinal`},
		match:    regexp.MustCompile(`invalid device ordinal`),
		explain: func(m []string, c failureContext) (string, string) {
			detail := c.who() + " chose a GPU its container does not have (invalid device ordinal)"
			if c.gpus == 0 {
				return detail, "the job asks for no GPUs: ask for them per worker (--gpus N), and select each rank's GPU by its local rank (OMPI_COMM_WORLD_LOCAL_RANK or LOCAL_RANK)"
			}
			fix := fmt.Sprintf("each worker has %d %s, numbered 0 to %d: select each rank's GPU by its local rank (OMPI_COMM_WORLD_LOCAL_RANK or LOCAL_RANK)", c.gpus, gpuNoun(c.gpus), c.gpus-1)
			if int64(c.slots) > c.gpus {
				fix += fmt.Sprintf(", and run no more ranks per worker than that (the job runs %d: --slots-per-worker %d)", c.slots, c.gpus)
			}
			return detail, fix
		},
	},
	{
		reason:   ReasonNCCLDuplicateGPU,
		weight:   own,
		program:  true,
		examples: []string{`misc/nccl.cc:904 NCCL WARN Duplicate GPU detected : rank 2 and rank 3 both on CUDA device 1b000`},
		match:    regexp.MustCompile(`Duplicate GPU detected : rank ([0-9]+) and rank ([0-9]+) both on CUDA device ([0-9a-fA-F]+)`),
		explain: func(m []string, c failureContext) (string, string) {
			detail := fmt.Sprintf("NCCL ranks %s and %s share one GPU (CUDA device %s); NCCL needs a GPU per rank", m[1], m[2], m[3])
			if c.gpus > 0 && int64(c.slots) > c.gpus {
				return detail, fmt.Sprintf("the job runs %d ranks per worker on %d %s: make them equal (--slots-per-worker %d, or --gpus %d)", c.slots, c.gpus, gpuNoun(c.gpus), c.gpus, c.slots)
			}
			return detail, "select each rank's GPU by its local rank before NCCL starts (torch.cuda.set_device(int(os.environ[\"OMPI_COMM_WORLD_LOCAL_RANK\"])), or LOCAL_RANK), with no more ranks per worker than GPUs per worker"
		},
	},
	{
		reason:   ReasonNCCLNoSocketInterface,
		weight:   own,
		program:  true,
		examples: []string{`host:41:41 [0] bootstrap.cc:86 NCCL WARN Bootstrap : no socket interface found`, `NET/Socket : no interface found`},
		match:    regexp.MustCompile(`no socket interface found|NET/Socket : no interface found`),
		explain: func(m []string, c failureContext) (string, string) {
			detail := c.who() + "'s NCCL found no network interface to use"
			have := "eth0 (the pod network)"
			if len(c.interfaces) > 0 {
				have += ", " + strings.Join(c.interfaces, ", ")
			}
			if c.socketIfName != "" {
				return detail + ": NCCL_SOCKET_IFNAME=" + c.socketIfName + " names none of the pod's",
					"set NCCL_SOCKET_IFNAME (in the job's --env, or its MPINetworkProfile's env) to an interface the pods have: " + have + "; or leave it unset for NCCL to choose"
			}
			return detail, "set NCCL_SOCKET_IFNAME to an interface the pods have: " + have + " (in the job's MPINetworkProfile's env, for every job on that network)"
		},
	},
	{
		reason:   ReasonNCCLPeerLost,
		weight:   echo,
		program:  true,
		examples: []string{`torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5`},
		match:    regexp.MustCompile(`ncclRemoteError|remote process exited or there was a network error|NCCL WARN .*(?:Connection closed by remote peer|Connection reset by peer)`),
		explain: func(m []string, c failureContext) (string, string) {
			return "NCCL of " + c.who() + " lost a peer: another rank exited, or the network between them failed",
				"the rank that went first is the cause: see the other findings and the ranks' output (" + c.logsHint() + ")"
		},
	},
	{
		reason:   ReasonNCCLError,
		weight:   own,
		program:  true,
		examples: []string{"ncclUnhandledCudaError: Call to CUDA function failed. Last error: Cuda failure 'out of memory'"},
		match:    regexp.MustCompile(`Last error: (.+)`),
		explain:  ncclError,
	},
	{
		reason:   ReasonNCCLError,
		weight:   ownGeneric,
		program:  true,
		examples: []string{`torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5`},
		match:    regexp.MustCompile(`NCCL error in: [^,]*, ([^,(]+)`),
		explain:  ncclError,
	},
	{
		reason:   ReasonNCCLError,
		weight:   warning,
		program:  true,
		examples: []string{`host:41:80 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<43722> with status=12 opcode=0 len=0 vendor err 129 (Recv)`},
		match:    regexp.MustCompile(`NCCL WARN (.+)`),
		explain:  ncclError,
	},
	{
		reason:   ReasonRendezvousTimeout,
		weight:   echo,
		program:  true,
		examples: []string{`torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined.`},
		match:    regexp.MustCompile(`Timed out after ([0-9]+) seconds waiting for clients\. ([0-9]+)/([0-9]+) clients joined`),
		explain: func(m []string, c failureContext) (string, string) {
			return fmt.Sprintf("the ranks' rendezvous timed out after %s s with %s of %s ranks joined", m[1], m[2], m[3]),
				"the missing ranks never reached rank 0's store (MASTER_ADDR, MASTER_PORT): see whether they started and failed first (" + c.logsHint() + "), and that WORLD_SIZE counts the job's ranks"
		},
	},
	{
		reason:  ReasonCollectiveTimeout,
		weight:  echo,
		program: true,
		examples: []string{
			`[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1207, OpType=ALLREDUCE, NumelIn=4194304, NumelOut=4194304, Timeout(ms)=600000) ran for 600351 milliseconds before timing out.`,
			`RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete`,
		},
		match: regexp.MustCompile(`(?:\[Rank (?P<rank>[0-9]+)\] )?Watchdog caught collective operation timeout: WorkNCCL\((?:.*?OpType=([A-Z_]+))?.*?\) ran for ([0-9]+) milliseconds|Timed out waiting ([0-9]+)ms for (send|recv) operation to complete`),
		explain: func(m []string, c failureContext) (string, string) {
			var detail string
			if m[3] != "" {
				op := "a collective"
				if m[2] != "" {
					op = "a collective (" + m[2] + ")"
				}
				detail = fmt.Sprintf("%s of %s timed out after %s", op, c.who(), seconds(m[3]))
			} else {
				detail = fmt.Sprintf("a %s of %s timed out after %s: a peer never joined the collective", m[5], c.who(), seconds(m[4]))
			}
			return detail, "another rank failed, hangs or never reached the same collective: see the other findings and the ranks' output (" + c.logsHint() + "); a step that is only slow needs a longer timeout (init_process_group(timeout=...))"
		},
	},
}

// ncclError explains NCCL's own words for a failure.
func ncclError(m []string, c failureContext) (string, string) {
	words := strings.TrimSpace(strings.Join(m[1:], ""))
	return "NCCL of " + c.who() + " failed: " + bounded(words),
		"--env NCCL_DEBUG=INFO prints NCCL's setup step by step; check the job's network settings (NCCL_SOCKET_IFNAME, NCCL_IB_HCA in its MPINetworkProfile) against its pods (kubectl mpi doctor)"
}

// seconds renders milliseconds as PyTorch printed them, in seconds.
func seconds(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return ms + " ms"
	}
	if n%1000 == 0 {
		return fmt.Sprintf("%d s", n/1000)
	}
	return fmt.Sprintf("%.1f s", float64(n)/1000)
}

func gpuNoun(n int64) string {
	if n == 1 {
		return "GPU"
	}
	return "GPUs"
}
