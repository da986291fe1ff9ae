package framework

import (
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RecordingProxy stands between a client and the API server on loopback
// and records every request, for a spec to count what that client asked
// of the API server. It holds the credentials of the config it was made
// from; clients reach it over plain HTTP (Kubeconfig).
type RecordingProxy struct {
	listener net.Listener

	mu       sync.Mutex
	requests []Request
}

// Request is one request a RecordingProxy passed on.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	// Bytes is the size of the answer's body so far (a watch's grows).
	Bytes int64
}

// Watch reports whether the request is a watch.
func (r Request) Watch() bool { return r.Query.Get("watch") == "true" }

// NewRecordingProxy starts a proxy to the API server cfg reaches; it stops
// with the spec.
func NewRecordingProxy(cfg *rest.Config) *RecordingProxy {
	ginkgo.GinkgoHelper()
	target, err := url.Parse(cfg.Host)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	transport, err := rest.TransportFor(cfg)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	backend := httputil.NewSingleHostReverseProxy(target)
	backend.Transport = transport
	backend.FlushInterval = -1 // watches and logs stream
	backend.ErrorLog = log.New(ginkgo.GinkgoWriter, "recording proxy: ", 0)
	p := &RecordingProxy{}
	p.listener, err = net.Listen("tcp", "127.0.0.1:0")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query()})
		i := len(p.requests) - 1
		p.mu.Unlock()
		backend.ServeHTTP(&countingWriter{ResponseWriter: w, add: func(n int) {
			p.mu.Lock()
			p.requests[i].Bytes += int64(n)
			p.mu.Unlock()
		}}, r)
	})}
	go func() { _ = srv.Serve(p.listener) }()
	ginkgo.DeferCleanup(srv.Close)
	return p
}

// Kubeconfig writes a kubeconfig for the proxy into dir.
func (p *RecordingProxy) Kubeconfig(dir string) string {
	ginkgo.GinkgoHelper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["recorded"] = &clientcmdapi.Cluster{Server: "http://" + p.listener.Addr().String()}
	kc.AuthInfos["recorded"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["recorded"] = &clientcmdapi.Context{Cluster: "recorded", AuthInfo: "recorded"}
	kc.CurrentContext = "recorded"
	path := filepath.Join(dir, "recorded-kubeconfig")
	gomega.Expect(clientcmd.WriteToFile(*kc, path)).To(gomega.Succeed())
	return path
}

// Count is how many requests so far match.
func (p *RecordingProxy) Count(match func(Request) bool) int {
	return len(p.Matching(match))
}

// Matching is the requests so far that match, in the order they came.
func (p *RecordingProxy) Matching(match func(Request) bool) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Request
	for _, r := range p.requests {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// countingWriter counts the bytes of an answer's body as they pass.
type countingWriter struct {
	http.ResponseWriter
	add func(int)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.add(n)
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
