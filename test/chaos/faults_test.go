package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// fault is what the proxy does to one request instead of passing it on.
type fault string

const (
	faultConflict  fault = "409 Conflict"
	faultThrottle  fault = "429 Too Many Requests"
	faultInternal  fault = "500 Internal Server Error"
	faultUnavail   fault = "503 Service Unavailable"
	faultLost      fault = "write applied, answer lost (500)"
	faultSlow      fault = "answered 2s late"
	faultWatchDrop fault = "watch cut"
)

// faultProxy stands between the operator and the API server on loopback,
// and fails a fraction of the operator's requests: answers the API server
// gives under load or in a restart, writes whose answer is lost, slow
// answers, and watches cut short.
type faultProxy struct {
	// rate of requests failed; watchRate of watches cut.
	rate, watchRate float64
	backend         *httputil.ReverseProxy
	listener        net.Listener

	mu       sync.Mutex
	rng      *rand.Rand
	requests map[string]int // by verb
	faults   map[fault]int
	// recent are the last requests but watches, "VERB path", for a
	// failure to say what the operator sent.
	recent []string
}

// maxRecent bounds faultProxy.recent.
const maxRecent = 50

func newFaultProxy(rate, watchRate float64, seed uint64) *faultProxy {
	GinkgoHelper()
	target, err := url.Parse(fw.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(fw.Config)
	Expect(err).NotTo(HaveOccurred())
	backend := httputil.NewSingleHostReverseProxy(target)
	backend.Transport = transport
	backend.FlushInterval = -1 // watches stream
	// Connections the API server's restarts reset: the spec's output, not stderr.
	backend.ErrorLog = log.New(GinkgoWriter, "proxy: ", 0)
	p := &faultProxy{rate: rate, watchRate: watchRate, backend: backend, rng: rand.New(rand.NewPCG(seed, 29)),
		requests: map[string]int{}, faults: map[fault]int{}}
	p.listener, err = net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	go func() { _ = http.Serve(p.listener, p) }()
	return p
}

func (p *faultProxy) close() { _ = p.listener.Close() }

// kubeconfig is a kubeconfig for the proxy (plain HTTP on loopback; the
// proxy holds the credentials).
func (p *faultProxy) kubeconfig(dir string) string {
	GinkgoHelper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["faulty"] = &clientcmdapi.Cluster{Server: "http://" + p.listener.Addr().String()}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["faulty"] = &clientcmdapi.Context{Cluster: "faulty", AuthInfo: "operator"}
	kc.CurrentContext = "faulty"
	path := filepath.Join(dir, "faulty-kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path
}

func (p *faultProxy) pick(r *http.Request) (fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	verb := r.Method
	watch := r.URL.Query().Get("watch") == "true"
	if watch {
		verb = "WATCH"
	}
	p.requests[verb]++
	if !watch {
		if len(p.recent) == maxRecent {
			p.recent = p.recent[1:]
		}
		p.recent = append(p.recent, verb+" "+r.URL.RequestURI())
	}
	rate := p.rate
	if watch {
		rate = p.watchRate
	}
	if p.rng.Float64() >= rate {
		return "", 0
	}
	var f fault
	switch {
	case watch:
		f = faultWatchDrop
	case r.Method == http.MethodGet:
		f = []fault{faultThrottle, faultInternal, faultUnavail, faultSlow}[p.rng.IntN(4)]
	default:
		f = []fault{faultConflict, faultThrottle, faultInternal, faultUnavail, faultLost, faultSlow}[p.rng.IntN(6)]
	}
	p.faults[f]++
	return f, time.Duration(p.rng.IntN(5000)) * time.Millisecond
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, after := p.pick(r)
	switch f {
	case "":
		p.backend.ServeHTTP(w, r)
	case faultWatchDrop:
		ctx, cancel := context.WithTimeout(r.Context(), after)
		defer cancel()
		p.backend.ServeHTTP(w, r.WithContext(ctx))
	case faultSlow:
		time.Sleep(2 * time.Second)
		p.backend.ServeHTTP(w, r)
	case faultLost:
		p.backend.ServeHTTP(discard{header: http.Header{}}, r)
		status(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected: the answer was lost")
	case faultConflict:
		status(w, http.StatusConflict, metav1.StatusReasonConflict, "injected: the object has been modified; please apply your changes to the latest version and try again")
	case faultThrottle:
		w.Header().Set("Retry-After", "1")
		status(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "injected: too many requests")
	case faultInternal:
		status(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected: internal error")
	case faultUnavail:
		status(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "injected: unavailable")
	}
}

// status answers as the API server does, with a Status.
func status(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}

// discard is a ResponseWriter that drops the answer.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

func (p *faultProxy) report() (requests int, byVerb string, faults string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var verbs, fs []string
	for v, n := range p.requests {
		if v != "WATCH" {
			requests += n
		}
		verbs = append(verbs, fmt.Sprintf("%s %d", v, n))
	}
	for f, n := range p.faults {
		fs = append(fs, fmt.Sprintf("%s: %d", f, n))
	}
	return requests, strings.Join(verbs, ", "), strings.Join(fs, ", ")
}

var _ = Describe("The operator behind an API server that fails some of its requests", func() {
	It("creates and finishes 200 jobs, each with exactly its children, with a bounded number of requests per job", func(sctx SpecContext) {
		const n = 200
		ns := fw.NewNamespace(sctx, "faults").Name
		// Watches are few and long: a third of them is cut within 5s.
		proxy, _ := behindProxy(ns, 0.03, 1.0/3)

		var refused atomic.Int64
		for i := range n {
			createRetrying(ns, fmt.Sprintf("job-%03d", i), &refused)
		}
		Eventually(allCreated(ns), 3*time.Minute, 200*time.Millisecond).Should(Succeed())
		var list trainer.TrainJobList
		Expect(fw.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		for i := range list.Items {
			complete(client.ObjectKey{Namespace: ns, Name: mpi.JobSetName(list.Items[i].Name)})
		}
		Eventually(allFinished(ns, n), 3*time.Minute, 200*time.Millisecond).Should(Succeed())
		Expect(fw.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		expectChildrenOwnedOnce(ns, list.Items)

		perJob, verbs := proxy.expectSettled(n)
		_, _, faults := proxy.report()
		GinkgoWriter.Printf("requests per job under faults: %.1f (%s); faults injected: %s\n", perJob, verbs, faults)
	})
})

// behindProxy starts the operator behind a proxy failing the given rates of
// requests and watches, the shipped runtimes, and the JobSet controller's
// part for ns; the spec's end stops them.
func behindProxy(ns string, rate, watchRate float64) (*faultProxy, *operatorProcess) {
	GinkgoHelper()
	proxy := newFaultProxy(rate, watchRate, uint64(GinkgoRandomSeed()))
	DeferCleanup(proxy.close)
	dir := GinkgoT().TempDir()
	op := &operatorProcess{dir: dir, kubeconfig: proxy.kubeconfig(dir)}
	DeferCleanup(op.stop)
	op.start()
	ensureRuntimes()
	DeferCleanup(observeJobSets(ns))
	return proxy, op
}

// expectSettled checks that the operator, its n jobs done, sends no more
// requests (a hot loop would), and that it sent a bounded number per job.
func (p *faultProxy) expectSettled(n int) (perJob float64, byVerb string) {
	GinkgoHelper()
	before, _, _ := p.report()
	time.Sleep(5 * time.Second)
	after, verbs, _ := p.report()
	p.mu.Lock()
	recent := strings.Join(p.recent, "\n")
	p.mu.Unlock()
	Expect(after-before).To(BeNumerically("<", 20), "the operator still sends requests with nothing to do; its last requests:\n%s", recent)
	perJob = float64(after) / float64(n)
	Expect(perJob).To(BeNumerically("<", 25), "requests per job are bounded")
	return perJob, verbs
}
