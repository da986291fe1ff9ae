// Package exec is kubectl mpi exec-rank, which runs commands in the pods of
// MPI ranks: it maps a rank to the pod that runs it (the job's placement,
// the same the operator writes the hostfile from) and execs through the API
// server, alone or on every worker at once with prefixed output.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/job"
)

// hostPod is the pod of a host.
type hostPod struct {
	Host mpi.Host
	// Ranks are the host's ranks in words ("ranks 4-7").
	Ranks string
	Pod   *corev1.Pod
}

// forRank finds the pod that runs an MPI rank.
func forRank(info *job.Info, pods []corev1.Pod, rank int32) (*hostPod, error) {
	placement := info.Placement()
	host, err := placement.HostOfRank(rank)
	if err != nil {
		return nil, fmt.Errorf("MPI job %s: %w", info.TrainJob.Name, err)
	}
	t := &hostPod{Host: host, Ranks: placement.RankRange(host.Role, host.Index)}
	if t.Pod = job.PodOf(pods, host.Role, host.Index); t.Pod == nil {
		return nil, fmt.Errorf("rank %d runs on %s (%s), which has no pod: the job is %s", rank, host.Name(), t.Ranks, trainjob.StateOf(info.TrainJob).Phase)
	}
	if err := runnable(t.Pod); err != nil {
		return nil, fmt.Errorf("rank %d runs on %s, pod %s: %w", rank, host.Name(), t.Pod.Name, err)
	}
	return t, nil
}

// workers finds the pods of every worker, by index.
func workers(info *job.Info, pods []corev1.Pod) ([]*hostPod, error) {
	placement := info.Placement()
	var out []*hostPod
	var missing []string
	byHost := job.IndexHosts(pods)
	for i := range info.Workers() {
		p := byHost.Of(api.RoleWorker, i)
		h := mpi.Host{Role: api.RoleWorker, ReplicatedJob: mpi.NodeJob, Index: i}
		if p == nil || runnable(p) != nil {
			missing = append(missing, h.Name())
			continue
		}
		out = append(out, &hostPod{Host: h, Ranks: placement.RankRange(h.Role, h.Index), Pod: p})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("MPI job %s: %d of %d workers are not running (%v); exec --all needs every worker", info.TrainJob.Name, len(missing), info.Workers(), missing)
	}
	return out, nil
}

func runnable(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		return fmt.Errorf("the pod is %s, not Running", phase)
	}
	return nil
}

// request is one command in one container.
type request struct {
	Pod       *corev1.Pod
	Container string
	Command   []string
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer
	TTY       bool
	Sizes     remotecommand.TerminalSizeQueue
}

// execute execs a command and returns its exit code: 0, the command's own
// non-zero code, or an error when it could not be run at all.
func execute(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, r request) (int, error) {
	req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.Pod.Namespace).Name(r.Pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: r.Container,
			Command:   r.Command,
			Stdin:     r.Stdin != nil,
			Stdout:    r.Stdout != nil,
			Stderr:    r.Stderr != nil && !r.TTY,
			TTY:       r.TTY,
		}, scheme.ParameterCodec)
	// WebSockets first, as kubectl does; SPDY where the API server or a
	// proxy does not upgrade.
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return 0, fmt.Errorf("preparing exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return 0, fmt.Errorf("preparing exec: %w", err)
	}
	executor, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, err
	}
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Tty: r.TTY, TerminalSizeQueue: r.Sizes,
	})
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return exitErr.ExitStatus(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("exec in pod %s: %w", r.Pod.Name, err)
	}
	return 0, nil
}

// result is how a command ended on one host.
type result struct {
	Target *hostPod
	Code   int
	Err    error
}

// execAll runs a command on every target at once, each output line prefixed
// with the host ("[worker-2] "). Results are in the targets' order.
func execAll(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, targets []*hostPod, container string, command []string, stdout, stderr io.Writer) []result {
	var outMu sync.Mutex
	results := make([]result, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prefix := "[" + t.Host.Name() + "] "
			o := &lineWriter{mu: &outMu, w: stdout, prefix: prefix}
			e := &lineWriter{mu: &outMu, w: stderr, prefix: prefix}
			code, err := execute(ctx, cfg, kube, request{Pod: t.Pod, Container: container, Command: command, Stdout: o, Stderr: e})
			o.flush()
			e.flush()
			results[i] = result{Target: t, Code: code, Err: err}
		}()
	}
	wg.Wait()
	sort.SliceStable(results, func(a, b int) bool { return results[a].Target.Host.Index < results[b].Target.Host.Index })
	return results
}

// lineWriter writes whole lines, prefixed, to a shared output.
type lineWriter struct {
	mu      *sync.Mutex
	w       io.Writer
	prefix  string
	partial []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	end := bytes.LastIndexByte(l.partial, '\n')
	if end < 0 {
		return len(p), nil
	}
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(l.partial[:end+1], []byte{'\n'}) {
		if len(line) > 0 {
			out.WriteString(l.prefix)
			out.Write(line)
		}
	}
	l.partial = append([]byte(nil), l.partial[end+1:]...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (l *lineWriter) flush() {
	if len(l.partial) > 0 {
		_, _ = l.Write([]byte{'\n'})
	}
}

// Output runs a command in a container and returns at most limit bytes of
// what it printed and its exit code; an error when it could not be run.
// Others that read a rank's container (top's GPUs) share it.
func Output(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, pod *corev1.Pod, container string, command []string, limit int) ([]byte, int, error) {
	out := &boundedBuffer{limit: limit}
	code, err := execute(ctx, cfg, kube, request{Pod: pod, Container: container, Command: command, Stdout: out, Stderr: io.Discard})
	return out.Bytes(), code, err
}

// boundedBuffer keeps the first limit bytes written to it and drops the rest.
type boundedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
