package metricsauth_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/torus-mpi/torus/operator/metricsauth"
	"github.com/torus-mpi/torus/test/framework"
)

// serviceAccountToken creates a ServiceAccount and a token for it, as
// Prometheus would be given.
func serviceAccountToken(ns, name string) string {
	GinkgoHelper()
	_, err := clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

var _ = Describe("the metrics endpoint", Ordered, func() {
	var (
		server           *httptest.Server
		reviews          atomic.Int32
		reader, stranger string
	)

	BeforeAll(func() {
		ns, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "monitoring-"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		reader = serviceAccountToken(ns.Name, "prometheus")
		stranger = serviceAccountToken(ns.Name, "stranger")
		_, err = clientset.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "prometheus"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The API server authorizes from its informers' copy of the RBAC
		// objects: a new binding takes effect a moment later. The filter
		// remembers a denial for 10 s, so the first scrape must come after.
		Eventually(func(g Gomega) {
			review := &authorizationv1.SubjectAccessReview{Spec: framework.ServiceAccountReview(ns.Name, "prometheus")}
			review.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}
			sar, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sar.Status.Allowed).To(BeTrue(), "the binding is not in effect yet: %s", sar.Status.Reason)
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

		// The operator's own credentials, counting the reviews it sends.
		opCfg := rest.CopyConfig(cfg)
		opCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(r *http.Request) (*http.Response, error) {
				if strings.HasSuffix(r.URL.Path, "reviews") {
					reviews.Add(1)
				}
				return rt.RoundTrip(r)
			})
		})
		hc, err := rest.HTTPClientFor(opCfg)
		Expect(err).NotTo(HaveOccurred())
		filter, err := metricsauth.FilterProvider(opCfg, hc)
		Expect(err).NotTo(HaveOccurred())
		handler, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "torus_trainjobs_created_total 3")
		}))
		Expect(err).NotTo(HaveOccurred())
		server = httptest.NewServer(handler)
		DeferCleanup(server.Close)
	})

	// status is get's status code, for goroutines.
	status := func(path, token string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server.URL+path, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := server.Client().Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}

	get := func(path, token string) (int, string) {
		GinkgoHelper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server.URL+path, nil)
		Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := server.Client().Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}

	DescribeTable("answers",
		func(path string, token func() string, wantCode int, wantBody string) {
			code, body := get(path, token())
			Expect(code).To(Equal(wantCode))
			Expect(body).To(ContainSubstring(wantBody))
		},
		Entry("a ServiceAccount bound to a role that may get /metrics", "/metrics", func() string { return reader }, http.StatusOK, "torus_trainjobs_created_total 3"),
		Entry("no token with 401", "/metrics", func() string { return "" }, http.StatusUnauthorized, "send a bearer token"),
		Entry("a token the API server does not know with 401", "/metrics", func() string { return "not-a-token" }, http.StatusUnauthorized, "Unauthorized"),
		Entry("a valid token without the role with 403, naming the user", "/metrics", func() string { return stranger }, http.StatusForbidden,
			`user "system:serviceaccount:`),
		Entry("another path than the role allows with 403", "/debug", func() string { return reader }, http.StatusForbidden, "may not get /debug"),
	)

	It("asks the API server once per token and path while the answer is fresh", func() {
		get("/metrics", reader)
		before := reviews.Load()
		for range 5 {
			code, _ := get("/metrics", reader)
			Expect(code).To(Equal(http.StatusOK))
		}
		Expect(reviews.Load()).To(Equal(before))
		Expect(before).To(BeNumerically(">", 0), "the reviews went through the counted client")
	})

	It("refuses tokens longer than any the API server issues, without a review", func() {
		before := reviews.Load()
		code, _ := get("/metrics", strings.Repeat("a", 20<<10))
		Expect(code).To(Equal(http.StatusUnauthorized))
		Expect(reviews.Load()).To(Equal(before))
	})

	It("answers a flood of unknown tokens with 429s rather than the API server's time, and scrapers still get through", func() {
		before := reviews.Load()
		start := time.Now()
		// All at once, as a flood comes. One after another, each waiting for
		// its review, they would let the limiter refill between them on a
		// machine loaded enough that a review takes 160 ms.
		codes := make([]int, 100)
		errs := make([]error, len(codes))
		var flood sync.WaitGroup
		for i := range codes {
			flood.Go(func() { codes[i], errs[i] = status("/metrics", fmt.Sprintf("not-a-token-%d", i)) })
		}
		flood.Wait()
		elapsed := time.Since(start)
		limited := 0
		for i, code := range codes {
			Expect(errs[i]).NotTo(HaveOccurred())
			if code == http.StatusTooManyRequests {
				limited++
			} else {
				Expect(code).To(Equal(http.StatusUnauthorized))
			}
		}
		Expect(limited).To(BeNumerically(">", 0), "no request was limited")
		// One TokenReview per unknown token reviewed: no more than the
		// limiter's burst and its refill over the flood.
		Expect(reviews.Load() - before).To(BeNumerically("<=", 20+int32(5*elapsed.Seconds())+1))
		Eventually(func() int { code, _ := get("/metrics", reader); return code }, 10*time.Second, 200*time.Millisecond).Should(Equal(http.StatusOK))
	})
})

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
