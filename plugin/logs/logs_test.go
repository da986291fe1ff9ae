package logs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

func TestPrefixLines(t *testing.T) {
	got := string(prefixLines([]byte("[w] "), []byte("a\n\nb\n")))
	if want := "[w] a\n[w] \n[w] b\n"; got != want {
		t.Errorf("prefixLines() = %q, want %q", got, want)
	}
}

// Lines split across reads, a last line without a newline, and many
// streams at once: every line arrives whole, in order within its stream.
func TestPipeKeepsLinesWholeAndInOrder(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&out)
	s := &streamer{out: w}
	const streams, lines = 16, 500
	var wg sync.WaitGroup
	for i := range streams {
		var in strings.Builder
		for l := range lines {
			fmt.Fprintf(&in, "line %d of stream %d%s\n", l, i, strings.Repeat(".", l%37))
		}
		in.WriteString("no newline at the end")
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r io.Reader = strings.NewReader(in.String())
			if i%2 == 0 {
				r = iotest.OneByteReader(r)
			} else {
				r = iotest.HalfReader(r)
			}
			if err := s.pipe(context.Background(), r, []byte(fmt.Sprintf("[s%d] ", i)), &stream{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	w.close()
	next := make([]int, streams)
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var i int
		if _, err := fmt.Sscanf(line, "[s%d] ", &i); err != nil {
			t.Fatalf("line without a prefix: %q", line)
		}
		body := strings.TrimPrefix(line, fmt.Sprintf("[s%d] ", i))
		want := "no newline at the end"
		if next[i] < lines {
			want = fmt.Sprintf("line %d of stream %d%s", next[i], i, strings.Repeat(".", next[i]%37))
		}
		if body != want {
			t.Fatalf("stream %d: got %q, want %q", i, body, want)
		}
		next[i]++
	}
	for i, n := range next {
		if n != lines+1 {
			t.Errorf("stream %d: %d lines, want %d", i, n, lines+1)
		}
	}
}

func pod(name, role string, phase corev1.PodPhase, running bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"job": "pi", "role": role}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	cs := corev1.ContainerStatus{Name: "node"}
	if running {
		cs.State.Running = &corev1.ContainerStateRunning{}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	return p
}

func TestStreamSelectsPodsAndSaysWhichWait(t *testing.T) {
	kube := fake.NewClientset(
		pod("pi-launcher", "launcher", corev1.PodRunning, true),
		pod("pi-node-0", "worker", corev1.PodRunning, true),
		pod("pi-node-1", "worker", corev1.PodPending, false),
		pod("other", "worker", corev1.PodRunning, true),
	)
	var out, errOut bytes.Buffer
	err := Stream(context.Background(), kube, Options{
		Namespace: "ns", LabelSelector: "job=pi", Container: "node",
		Include: func(p *corev1.Pod) bool { return p.Name != "other" },
		Prefix:  func(p *corev1.Pod) string { return "[" + p.Name + "] " },
		Out:     &out, ErrOut: &errOut,
	})
	if err != nil {
		t.Fatalf("Stream() = %v", err)
	}
	// The fake client answers every log request with "fake logs".
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"[pi-launcher] fake logs", "[pi-node-0] fake logs"}
	if diff := cmp.Diff(want, sortStrings(got)); diff != "" {
		t.Errorf("output (-want,+got):\n%s", diff)
	}
	if want := "[pi-node-1] not started yet (ContainerCreating)\n"; errOut.String() != want {
		t.Errorf("notes = %q, want %q", errOut.String(), want)
	}
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// A stream that never ends its line (a progress bar, binary output) is
// written in pieces of at most maxLine, not held in memory whole.
func TestPipeBoundsLinesWithoutEnd(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&out)
	s := &streamer{out: w}
	endless := strings.Repeat("#", 3*maxLine+5)
	if err := s.pipe(context.Background(), strings.NewReader(endless), []byte("[w] "), &stream{}); err != nil {
		t.Fatal(err)
	}
	w.close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) < 4 {
		t.Fatalf("got %d lines, want the endless line in pieces", len(lines))
	}
	total := 0
	for _, l := range lines {
		body := strings.TrimPrefix(l, "[w] ")
		if len(body) > maxLine+64*1024 {
			t.Fatalf("a piece of %d bytes; pieces stay near %d", len(body), maxLine)
		}
		total += len(body)
	}
	if total != len(endless) {
		t.Errorf("wrote %d bytes of %d", total, len(endless))
	}
}

// Without -f the first pod's stream opens alone, before the others: its
// first line does not wait on the server answering every stream at once.
// The server holds the first request back a while; a request for another
// pod arriving meanwhile fails the test.
func TestFirstStreamOpensAlone(t *testing.T) {
	var mu sync.Mutex
	var order []string
	firstAnswered := false
	early := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(path.Dir(r.URL.Path))
		mu.Lock()
		order = append(order, name)
		if len(order) > 1 && !firstAnswered {
			early++
		}
		first := len(order) == 1
		mu.Unlock()
		if first {
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			firstAnswered = true
			mu.Unlock()
		}
		fmt.Fprintf(w, "hello from %s\n", name)
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.PodList{}
	for _, name := range []string{"pi-launcher", "pi-node-0", "pi-node-1", "pi-node-2"} {
		list.Items = append(list.Items, *pod(name, "worker", corev1.PodRunning, true))
	}
	var out bytes.Buffer
	err = Stream(context.Background(), kube, Options{
		Namespace: "ns", LabelSelector: "job=pi", Container: "node", Listed: list,
		Order: func([]corev1.Pod) {},
		Out:   &out, ErrOut: io.Discard,
	})
	if err != nil {
		t.Fatalf("Stream() = %v", err)
	}
	if len(order) != 4 || order[0] != "pi-launcher" {
		t.Fatalf("log requests %v, want the launcher's first of 4", order)
	}
	if early > 0 {
		t.Errorf("%d streams were requested before the first one was answered", early)
	}
	if got := strings.Count(out.String(), "hello from"); got != 4 {
		t.Errorf("%d lines, want 4:\n%s", got, out.String())
	}
}

// Without -f a job's logs are read maxReads at a time. The server
// answers the first request at once and holds the others, letting one go
// only when as many as the bound allows wait: a reader that opened more
// would be seen with more open, one that opened fewer would stall.
func TestReadsAreBounded(t *testing.T) {
	const pods = 200
	var mu sync.Mutex
	requests, open, peak, held := 0, 0, 0, 0
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(path.Dir(r.URL.Path))
		mu.Lock()
		requests++
		first := requests == 1
		if !first {
			open++
			held++
			peak = max(peak, open)
		}
		mu.Unlock()
		if !first {
			<-release
			defer func() {
				mu.Lock()
				open--
				mu.Unlock()
			}()
		}
		fmt.Fprintf(w, "hello from %s\n", name)
	}))
	defer srv.Close()
	go func() {
		releaseInTurn(t, &mu, &held, pods-1, release, "reads were never opened")
	}()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.PodList{}
	for i := range pods {
		list.Items = append(list.Items, *pod(fmt.Sprintf("pi-node-%d", i), "worker", corev1.PodRunning, true))
	}
	var out bytes.Buffer
	err = Stream(context.Background(), kube, Options{
		Namespace: "ns", LabelSelector: "job=pi", Container: "node", Listed: list,
		Out: &out, ErrOut: io.Discard,
	})
	if err != nil {
		t.Fatalf("Stream() = %v", err)
	}
	if got := strings.Count(out.String(), "hello from"); got != pods {
		t.Errorf("%d lines, want %d", got, pods)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != maxReads {
		t.Errorf("at most %d reads were open at once, want %d", peak, maxReads)
	}
}

// A pod whose kubelet never answers gives up its read after OpenTimeout,
// with a line that names its node: as many such pods as there are reads
// do not keep every other pod's log waiting behind them.
func TestUnansweredReadsGiveWay(t *testing.T) {
	const hung, answered = maxReads, 8
	// Closed before the server, so that a failed test does not wait for
	// the hung requests.
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(path.Dir(r.URL.Path))
		if strings.HasPrefix(name, "pi-hung-") {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		fmt.Fprintf(w, "hello from %s\n", name)
	}))
	defer srv.Close()
	defer close(stop)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.PodList{}
	for i := range hung + answered {
		// The hung pods come first, as pods of the first hosts would.
		name := fmt.Sprintf("pi-hung-%02d", i)
		if i >= hung {
			name = fmt.Sprintf("pi-node-%02d", i)
		}
		p := pod(name, "worker", corev1.PodRunning, true)
		p.Spec.NodeName = "node-" + name
		list.Items = append(list.Items, *p)
	}
	var out, errOut lockedBuffer
	done := make(chan error, 1)
	go func() {
		// Long beside a loopback answer on a busy machine: the answered
		// pods' requests have the same time to be answered.
		done <- Stream(context.Background(), kube, Options{
			Namespace: "ns", LabelSelector: "job=pi", Container: "node", Listed: list,
			OpenTimeout: 5 * time.Second, Out: &out, ErrOut: &errOut,
		})
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the reads of %d answered pods waited behind %d unanswered ones; read so far: %q", answered, hung, out.String())
	}
	if want := fmt.Sprintf("could not read the logs of %d pods", hung); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Stream() = %v, want %q", err, want)
	}
	if got := strings.Count(out.String(), "hello from pi-node-"); got != answered {
		t.Errorf("%d answered pods' lines, want %d:\n%s", got, answered, out.String())
	}
	for i := range hung {
		want := fmt.Sprintf("cannot read logs: no answer within 5s from the kubelet of node node-pi-hung-%02d", i)
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("no line %q in:\n%s", want, errOut.String())
		}
	}
}

// Following keeps every pod's stream open at once, but opens them at most
// maxReads at a time: a job of thousands of pods does not send thousands
// of requests through the API server to the kubelets in one moment.
func TestFollowOpensAreBounded(t *testing.T) {
	const pods = 200
	var mu sync.Mutex
	opening, peak, held := 0, 0, 0
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			// The reader's watch for new pods: open, and quiet.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		name := path.Base(path.Dir(r.URL.Path))
		mu.Lock()
		opening++
		held++
		peak = max(peak, opening)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		// Counted out before the answer: the reader may open the next
		// stream only once it has this one's.
		mu.Lock()
		opening--
		mu.Unlock()
		fmt.Fprintf(w, "hello from %s\n", name)
		w.(http.Flusher).Flush()
		// A followed log stays open until its reader closes it.
		<-r.Context().Done()
	}))
	defer srv.Close()
	out := &lockedBuffer{}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if !releaseInTurn(t, &mu, &held, pods, release, "streams were never being opened") {
			return
		}
		// The job ends once every pod's line has been read.
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(out.String(), "hello from") < pods && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.PodList{}
	for i := range pods {
		list.Items = append(list.Items, *pod(fmt.Sprintf("pi-node-%d", i), "worker", corev1.PodRunning, true))
	}
	err = Stream(context.Background(), kube, Options{
		Namespace: "ns", LabelSelector: "job=pi", Container: "node", Listed: list,
		Follow: true, Ended: ended, Drain: 10 * time.Millisecond,
		Out: out, ErrOut: io.Discard,
	})
	if err != nil {
		t.Fatalf("Stream() = %v", err)
	}
	if got := strings.Count(out.String(), "hello from"); got != pods {
		t.Errorf("%d lines, want %d", got, pods)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != maxReads {
		t.Errorf("at most %d streams were being opened at once, want %d", peak, maxReads)
	}
}

// releaseInTurn answers n requests the test server holds, one at a time,
// each once the reader holds as many as it may at once (maxReads, or all
// that are left); held counts the requests held, under mu. It fails t and
// frees every request when the reader never holds that many.
func releaseInTurn(t *testing.T, mu *sync.Mutex, held *int, n int, release chan struct{}, what string) bool {
	for left := n; left > 0; left-- {
		// Each wait is for the reader's next request alone.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			ready := *held >= min(maxReads, left)
			if ready {
				*held--
			}
			mu.Unlock()
			if ready {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%d %s together", min(maxReads, left), what)
				close(release)
				return false
			}
			time.Sleep(time.Millisecond)
		}
		release <- struct{}{}
	}
	return true
}

// lockedBuffer is a buffer a test reads while the streamer writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
