package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// write is one kind of write request a contender sent.
type write struct {
	Agent       string // user agent up to the first space: "torus-operator", ".../leader-election"
	Verb        string // create, update, patch, apply, delete, deletecollection
	Resource    string // plural resource, "group/resource" outside the core group
	Subresource string
	Failed      bool // the API server answered 4xx or 5xx (e.g. 409 AlreadyExists)
}

func (w write) lease() bool { return w.Resource == "coordination.k8s.io/leases" }
func (w write) event() bool {
	return w.Resource == "events" || w.Resource == "events.k8s.io/events"
}

// counts are write requests by kind, the bytes of their bodies, and reads.
type counts struct {
	Writes map[write]int
	Bytes  map[write]int64
	Reads  int
}

func (c counts) sub(o counts) counts {
	out := counts{Writes: map[write]int{}, Bytes: map[write]int64{}, Reads: c.Reads - o.Reads}
	for k, v := range c.Writes {
		if d := v - o.Writes[k]; d != 0 {
			out.Writes[k] = d
		}
	}
	for k, v := range c.Bytes {
		if d := v - o.Bytes[k]; d != 0 {
			out.Bytes[k] = d
		}
	}
	return out
}

// bytes sums the request bodies of the writes keep accepts.
func (c counts) bytes(keep func(write) bool) int64 {
	var n int64
	for k, v := range c.Bytes {
		if keep(k) {
			n += v
		}
	}
	return n
}

// total sums the writes keep accepts.
func (c counts) total(keep func(write) bool) int {
	n := 0
	for k, v := range c.Writes {
		if keep(k) {
			n += v
		}
	}
	return n
}

// sorted lists the writes, most frequent first.
func (c counts) sorted() []write {
	out := make([]write, 0, len(c.Writes))
	for k := range c.Writes {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if c.Writes[out[i]] != c.Writes[out[j]] {
			return c.Writes[out[i]] > c.Writes[out[j]]
		}
		return fmt.Sprint(out[i]) < fmt.Sprint(out[j])
	})
	return out
}

// countingProxy is a TLS reverse proxy in front of the API server that
// counts every request by user agent, verb and resource: exact, and
// independent of what the API server's metrics label. The contender's
// kubeconfig points at it; it speaks HTTP/2 on both sides, as a client
// talking to the API server directly would.
type countingProxy struct {
	URL    string
	server *http.Server

	mu       sync.Mutex
	writes   map[write]int
	bytes    map[write]int64
	reads    int
	lastSeen time.Time // of the last write that was not a lease renewal
}

func startProxy(cp *controlPlane) (*countingProxy, error) {
	certDir, err := cp.servingCert("proxy")
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, err
	}
	pool := cp.ca.CertPool()
	target, err := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort))
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
	}
	p := &countingProxy{writes: map[write]int{}, bytes: map[write]int64{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: transport,
		// Watches stream: pass every chunk on at once.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A contender that stops cancels its watches: not worth a line.
			if !errors.Is(err, context.Canceled) {
				fmt.Println("bench: proxy:", r.Method, r.URL.Path, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.URL = "https://" + l.Addr().String()
	p.server = &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(rp, w, r) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
	}
	go func() {
		if err := p.server.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("bench: proxy stopped:", err)
		}
	}()
	return p, nil
}

func (p *countingProxy) serve(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	verb := writeVerb(r)
	if verb == "" {
		p.mu.Lock()
		p.reads++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
		return
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	// Counted as the proxy reads it: a chunked body has no length.
	body := &countingReader{ReadCloser: r.Body}
	r.Body = body
	rp.ServeHTTP(rec, r)
	resource, sub, named := parsePath(r.URL.Path)
	if verb == "delete" && !named {
		verb = "deletecollection"
	}
	agent, _, _ := strings.Cut(r.UserAgent(), " ")
	k := write{Agent: agent, Verb: verb, Resource: resource, Subresource: sub, Failed: rec.code >= 400}
	p.mu.Lock()
	p.writes[k]++
	p.bytes[k] += body.n
	if !k.lease() {
		p.lastSeen = time.Now()
	}
	p.mu.Unlock()
}

func (p *countingProxy) snapshot() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := counts{Writes: make(map[write]int, len(p.writes)), Bytes: make(map[write]int64, len(p.bytes)), Reads: p.reads}
	for k, v := range p.writes {
		c.Writes[k] = v
	}
	for k, v := range p.bytes {
		c.Bytes[k] = v
	}
	return c
}

// countingReader counts the bytes read through it.
type countingReader struct {
	io.ReadCloser
	n int64
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.n += int64(n)
	return n, err
}

// quiet waits until no write but lease renewals came for the given
// window, or max passed: the contender is done with what it had to do.
func (p *countingProxy) quiet(ctx context.Context, window, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		last := p.lastSeen
		p.mu.Unlock()
		if time.Since(last) >= window {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *countingProxy) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.server.Shutdown(ctx)
	_ = p.server.Close()
}

func writeVerb(r *http.Request) string {
	switch r.Method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			return "apply"
		}
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// parsePath turns /api/v1/namespaces/ns/configmaps/name or
// /apis/group/version/[namespaces/ns/]resource[/name[/sub]] into the
// resource ("configmaps", "jobset.x-k8s.io/jobsets"), the subresource and
// whether a name was given.
func parsePath(path string) (resource, sub string, named bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	group := ""
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return path, "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return path, "", false
	}
	resource = parts[0]
	if group != "" {
		resource = group + "/" + resource
	}
	if len(parts) >= 3 {
		sub = parts[2]
	}
	return resource, sub, len(parts) >= 2
}

// statusRecorder keeps the response code; Unwrap lets the reverse proxy
// reach the underlying writer's Flush.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
