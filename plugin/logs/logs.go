// Package logs is kubectl mpi logs: it streams the logs of many pods at
// once, each line prefixed with the MPI host it came from ("[launcher] ",
// "[worker-2] "). Every line of every pod is kept, in order within each pod;
// lines of different pods interleave as they arrive. Following, it starts
// streams for pods that appear later (a restarted job's new pods) and stops
// once the job ended and every stream is drained.
package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// firstStreamWait bounds how long the other streams wait for the first
// one to open.
const firstStreamWait = time.Second

// maxReads bounds the logs read at once without -f, and the streams being
// opened at once with -f. A log request is long-running to the API server:
// neither its inflight limits nor API Priority and Fairness count it, so
// the reader bounds its own. Each read holds a buffer and a connection
// through the node's kubelet; a job of thousands of pods is read in a
// stream of requests this many wide rather than thousands at once.
// Following keeps every stream open until the job ends, so all of them
// are open at once, but they are opened this many at a time.
const maxReads = 32

// defaultOpenTimeout bounds the wait for a log request's answer: the API
// server passes it on to the pod's kubelet and waits for it as long as it
// takes, and a kubelet that accepts the request and never answers (its
// node overloaded, its runtime stuck) would hold one of the maxReads reads
// for as long as the command runs, and with maxReads such pods every
// other pod's log would wait behind them. Answers come in milliseconds,
// seconds on a loaded cluster; a stream that opened takes as long as it
// needs.
const defaultOpenTimeout = 30 * time.Second

// defaultDrain is how long the stream of a pod that has stopped may stay
// silent before it is closed. A kubelet closes a follow stream when the
// container exits; this bounds the wait where one does not.
const defaultDrain = 2 * time.Second

// Options say which pods to stream and how.
type Options struct {
	Namespace     string
	LabelSelector string
	// Include picks the pods to stream; nil streams every pod selected.
	Include func(*corev1.Pod) bool
	// Prefix is what a pod's lines start with, e.g. "[worker-2] ".
	Prefix func(*corev1.Pod) string
	// Order sorts the pods streams are started for (launcher first).
	Order func([]corev1.Pod)
	// Container is the container whose logs are read.
	Container string

	Follow       bool
	SinceSeconds *int64
	TailLines    *int64
	Timestamps   bool
	Previous     bool

	// Ended is closed when the job ended: following then stops once every
	// stream is drained. Nil follows until ctx ends.
	Ended <-chan struct{}
	// Drain is defaultDrain when zero.
	Drain time.Duration
	// OpenTimeout is defaultOpenTimeout when zero.
	OpenTimeout time.Duration
	// Listed is the pods as listPods returned them for these options, for a
	// caller that listed them while it did something else; nil lists them.
	Listed *corev1.PodList

	// Out gets the lines; ErrOut notes about pods that have no logs yet and
	// errors of single streams.
	Out    io.Writer
	ErrOut io.Writer
}

// Stream writes the logs of the selected pods until they end (or, when
// following, until the job ended and every stream drained). It returns an
// error when a stream failed; the other streams still ran to their end.
func Stream(ctx context.Context, kube kubernetes.Interface, opts Options) error {
	if opts.Drain == 0 {
		opts.Drain = defaultDrain
	}
	if opts.OpenTimeout == 0 {
		opts.OpenTimeout = defaultOpenTimeout
	}
	if opts.Prefix == nil {
		opts.Prefix = func(p *corev1.Pod) string { return "[" + p.Name + "] " }
	}
	s := &streamer{kube: kube, opts: opts, active: map[string]*stream{}, started: map[string]bool{}}
	if opts.Follow {
		s.opening = make(chan struct{}, maxReads)
	} else {
		s.slots = make(chan struct{}, maxReads)
	}
	w := newWriter(opts.Out)
	s.out = w
	err := s.run(ctx)
	w.close()
	if werr := w.err(); werr != nil && err == nil {
		err = werr
	}
	return err
}

type streamer struct {
	kube kubernetes.Interface
	opts Options
	out  *writer

	mu      sync.Mutex
	active  map[string]*stream
	started map[string]bool
	failed  int
	wg      sync.WaitGroup
	// slots, when not nil, bounds the streams open at once (maxReads):
	// a stream takes one before it starts and gives it back when it ends.
	slots chan struct{}
	// opening, when not nil, bounds the streams being opened at once
	// (maxReads): a stream holds one until its request is answered.
	opening chan struct{}
}

type stream struct {
	uid    types.UID
	cancel context.CancelFunc
	// last is when data last arrived (unix nanoseconds).
	last atomic.Int64
	// stopped: the pod's container is no longer running.
	stopped atomic.Bool
	done    atomic.Bool
	// opened is closed once the request for the log has been answered.
	opened chan struct{}
	// previous reads the container's last run.
	previous bool
}

// listPods lists the pods opts select, before Include picks among them.
func listPods(ctx context.Context, kube kubernetes.Interface, opts Options) (*corev1.PodList, error) {
	pods, err := kube.CoreV1().Pods(opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return pods, nil
}

func (s *streamer) run(ctx context.Context) error {
	pods := s.opts.Listed
	if pods == nil {
		var err error
		if pods, err = listPods(ctx, s.kube, s.opts); err != nil {
			return err
		}
	}
	items := s.included(pods.Items)
	if !s.opts.Follow {
		waited := false
		for i := range items {
			select {
			case s.slots <- struct{}{}:
			case <-ctx.Done():
				s.wg.Wait()
				return ctx.Err()
			}
			st := s.maybeStart(ctx, &items[i], true)
			if st == nil {
				s.release()
			}
			if st != nil && !waited {
				// The first stream opens alone: opened beside all the
				// others, its first line waits on the API server and the
				// kubelets serving every stream at once (30–170 ms more at
				// 257 pods, measured). Without -f a kubelet answers at
				// once, with what the log holds; a slow one holds the
				// others back by firstStreamWait at most.
				waited = true
				select {
				case <-st.opened:
				case <-time.After(firstStreamWait):
				case <-ctx.Done():
				}
			}
		}
		s.wg.Wait()
		return s.result()
	}

	// Streams end with this context at the latest, so that none outlives
	// the command.
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	for i := range items {
		s.maybeStart(ctx, &items[i], true)
	}
	rv := pods.ResourceVersion
	events := make(chan watch.Event)
	go s.watchPods(ctx, rv, events)

	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	ended := s.opts.Ended
	jobEnded := false
	for {
		select {
		case <-ctx.Done():
			if jobEnded {
				return s.result()
			}
			return ctx.Err()
		case <-ended:
			// The job's pods are stopping: a stream that falls silent now
			// has said everything.
			jobEnded, ended = true, nil
			s.stopAll()
		case ev := <-events:
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				s.markStopped(p.UID)
				continue
			}
			if inc := s.included([]corev1.Pod{*p}); len(inc) == 1 {
				s.maybeStart(ctx, &inc[0], false)
			}
		case <-tick.C:
		}
		if s.drain() && jobEnded {
			return s.result()
		}
	}
}

// release gives back the slot of a stream that ended or never started.
func (s *streamer) release() {
	if s.slots != nil {
		<-s.slots
	}
}

func (s *streamer) result() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed > 0 {
		return fmt.Errorf("could not read the logs of %d pods (see above)", s.failed)
	}
	return nil
}

// watchPods sends pod events, re-watching when a watch ends.
func (s *streamer) watchPods(ctx context.Context, rv string, events chan<- watch.Event) {
	for ctx.Err() == nil {
		w, err := s.kube.CoreV1().Pods(s.opts.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: s.opts.LabelSelector, ResourceVersion: rv})
		if err != nil {
			// A lost resource version: start over from the current list;
			// streams already started are recognised and not repeated.
			list, lerr := s.kube.CoreV1().Pods(s.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.opts.LabelSelector})
			if lerr != nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				continue
			}
			rv = list.ResourceVersion
			for i := range list.Items {
				select {
				case events <- watch.Event{Type: watch.Modified, Object: &list.Items[i]}:
				case <-ctx.Done():
					return
				}
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				rv = p.ResourceVersion
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				w.Stop()
				return
			}
		}
		w.Stop()
	}
}

func (s *streamer) included(pods []corev1.Pod) []corev1.Pod {
	out := make([]corev1.Pod, 0, len(pods))
	for i := range pods {
		if s.opts.Include == nil || s.opts.Include(&pods[i]) {
			out = append(out, pods[i])
		}
	}
	if s.opts.Order != nil {
		s.opts.Order(out)
	} else {
		sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	}
	return out
}

// containerState finds the state of the streamed container.
func (s *streamer) containerState(p *corev1.Pod) (cs *corev1.ContainerStatus) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == s.opts.Container {
				return &list[i]
			}
		}
	}
	return nil
}

// maybeStart starts a pod's stream once its container has run, and
// returns it (nil when none started). first is true for pods found at the
// start, whose waiting is worth a note.
func (s *streamer) maybeStart(ctx context.Context, p *corev1.Pod, first bool) *stream {
	cs := s.containerState(p)
	podDone := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil
	running := cs != nil && cs.State.Running != nil
	terminated := cs != nil && cs.State.Terminated != nil
	previous := s.opts.Previous
	if previous {
		running, terminated = cs != nil && cs.LastTerminationState.Terminated != nil, true
	} else if !s.opts.Follow && !running && !terminated && cs != nil && cs.LastTerminationState.Terminated != nil {
		// Waiting to run again (CrashLoopBackOff): what it printed last
		// is what explains why, and the kubelet still holds it.
		previous, terminated = true, true
		reason := "waiting"
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			reason = cs.State.Waiting.Reason
		}
		fmt.Fprintf(s.opts.ErrOut, "%snot running (%s); the output of its last run follows\n", s.opts.Prefix(p), reason)
	}
	var restarts int32
	if cs != nil {
		restarts = cs.RestartCount
	}
	key := fmt.Sprintf("%s/%s/%d", p.UID, s.opts.Container, restarts)

	s.mu.Lock()
	defer s.mu.Unlock()
	if (terminated || podDone) && !running {
		s.stopLocked(p.UID)
	}
	if s.started[key] {
		return nil
	}
	if !running && !terminated {
		if first {
			phase := string(p.Status.Phase)
			if cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				phase = cs.State.Waiting.Reason
			}
			if s.opts.Previous {
				fmt.Fprintf(s.opts.ErrOut, "%shas no previous container\n", s.opts.Prefix(p))
			} else if s.opts.Follow {
				fmt.Fprintf(s.opts.ErrOut, "%snot started yet (%s); its logs follow when it starts\n", s.opts.Prefix(p), phase)
			} else {
				fmt.Fprintf(s.opts.ErrOut, "%snot started yet (%s)\n", s.opts.Prefix(p), phase)
			}
		}
		return nil
	}
	s.started[key] = true
	sctx, cancel := context.WithCancel(ctx)
	st := &stream{uid: p.UID, cancel: cancel, opened: make(chan struct{}), previous: previous}
	st.last.Store(time.Now().UnixNano())
	st.stopped.Store(terminated || podDone || !s.opts.Follow)
	s.active[key] = st
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.release()
		defer cancel()
		defer st.done.Store(true)
		err := s.copy(sctx, p.DeepCopy(), st)
		switch {
		case err == nil || sctx.Err() != nil:
		case apierrors.IsNotFound(err):
			// The pod went away (its job ended) before its stream opened.
			fmt.Fprintf(s.opts.ErrOut, "%spod %s was deleted before its logs were read\n", s.opts.Prefix(p), p.Name)
		default:
			s.mu.Lock()
			s.failed++
			s.mu.Unlock()
			fmt.Fprintf(s.opts.ErrOut, "%scannot read logs: %v\n", s.opts.Prefix(p), err)
		}
	}()
	return st
}

func (s *streamer) markStopped(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(uid)
}

func (s *streamer) stopLocked(uid types.UID) {
	for _, st := range s.active {
		if st.uid == uid {
			st.stopped.Store(true)
		}
	}
}

func (s *streamer) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.active {
		st.stopped.Store(true)
	}
}

// drain closes the streams of stopped pods that have been silent for the
// drain time, and reports whether no stream is left.
func (s *streamer) drain() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixNano()
	open := 0
	for _, st := range s.active {
		if st.done.Load() {
			continue
		}
		if st.stopped.Load() && now-st.last.Load() > int64(s.opts.Drain) {
			st.cancel()
			continue
		}
		open++
	}
	return open == 0
}

// copy streams one container's log into the writer, a batch of whole
// lines at a time, each line prefixed.
func (s *streamer) copy(ctx context.Context, p *corev1.Pod, st *stream) error {
	req := s.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container:    s.opts.Container,
		Follow:       s.opts.Follow,
		SinceSeconds: s.opts.SinceSeconds,
		TailLines:    s.opts.TailLines,
		Timestamps:   s.opts.Timestamps,
		Previous:     st.previous,
	})
	// The stream's own context: canceled when its request goes
	// unanswered, and, once answered, not before its log is read.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := s.open(ctx, cancel, req, p)
	close(st.opened)
	if err != nil {
		return err
	}
	defer rc.Close()
	return s.pipe(ctx, rc, []byte(s.opts.Prefix(p)), st)
}

// open sends a log request and waits for its answer, among at most
// maxReads being opened at once where s bounds them, and for at most
// OpenTimeout once sent; cancel ends ctx, the request's.
func (s *streamer) open(ctx context.Context, cancel context.CancelFunc, req *rest.Request, p *corev1.Pod) (io.ReadCloser, error) {
	if s.opening != nil {
		select {
		case s.opening <- struct{}{}:
			defer func() { <-s.opening }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	timer := time.AfterFunc(s.opts.OpenTimeout, cancel)
	rc, err := req.Stream(ctx)
	if !timer.Stop() {
		// Unanswered in time; an answer that came as the timer fired
		// is read no further.
		if rc != nil {
			rc.Close()
		}
		return nil, fmt.Errorf("no answer within %s from the kubelet of node %s, which may be down or overloaded (kubectl describe node %s)",
			s.opts.OpenTimeout, p.Spec.NodeName, p.Spec.NodeName)
	}
	return rc, err
}

// maxLine is the longest line pipe holds back waiting for its end.
const maxLine = 1 << 20

// pipe copies a log stream into the writer, whole lines at a time.
func (s *streamer) pipe(ctx context.Context, rc io.Reader, prefix []byte, st *stream) error {
	buf := make([]byte, 64*1024)
	var partial []byte
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			st.last.Store(time.Now().UnixNano())
			chunk := buf[:n]
			end := bytes.LastIndexByte(chunk, '\n')
			if end < 0 {
				partial = append(partial, chunk...)
				if len(partial) >= maxLine {
					// A line without end (a progress bar, binary output)
					// goes out in pieces rather than filling memory.
					s.out.write(prefixLines(prefix, append(partial, '\n')))
					partial = nil
				}
			} else {
				lines := chunk[:end+1]
				if len(partial) > 0 {
					lines = append(partial, lines...)
					partial = nil
				}
				s.out.write(prefixLines(prefix, lines))
				partial = append(partial, chunk[end+1:]...)
			}
		}
		if err != nil {
			if len(partial) > 0 {
				s.out.write(prefixLines(prefix, append(partial, '\n')))
			}
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// prefixLines copies whole lines with a prefix before each.
func prefixLines(prefix, lines []byte) []byte {
	n := bytes.Count(lines, []byte{'\n'})
	out := make([]byte, 0, len(lines)+n*len(prefix))
	for len(lines) > 0 {
		i := bytes.IndexByte(lines, '\n')
		out = append(out, prefix...)
		out = append(out, lines[:i+1]...)
		lines = lines[i+1:]
	}
	return out
}

// writer serialises batches from every stream onto one output, buffered,
// flushed whenever no batch is waiting so that following stays live.
type writer struct {
	ch   chan []byte
	done chan struct{}
	e    error
}

func newWriter(out io.Writer) *writer {
	w := &writer{ch: make(chan []byte, 1024), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		bw := bufio.NewWriterSize(out, 256*1024)
		for b := range w.ch {
			if w.e != nil {
				continue
			}
			if _, err := bw.Write(b); err != nil {
				w.e = err
				continue
			}
			if len(w.ch) == 0 {
				if err := bw.Flush(); err != nil {
					w.e = err
				}
			}
		}
		if w.e == nil {
			w.e = bw.Flush()
		}
	}()
	return w
}

func (w *writer) write(b []byte) { w.ch <- b }

func (w *writer) close() {
	close(w.ch)
	<-w.done
}

func (w *writer) err() error { return w.e }
