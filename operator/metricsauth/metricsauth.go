// Package metricsauth guards the operator's metrics endpoint: a request
// needs a bearer token the API server accepts (a TokenReview) for a user
// the API server allows to get the path (a SubjectAccessReview), the way
// kube-rbac-proxy and Prometheus's ServiceAccount setups expect.
//
// controller-runtime ships such a filter, but it is built on
// k8s.io/apiserver's delegating authenticator and authorizer, which link
// cel-go, OpenTelemetry and gRPC into the operator, which cost it tens of
// megabytes of binary and resident memory (test/perf/README.md). This one uses
// client-go's review clients only.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long answers are remembered. Prometheus scrapes every 15-60 s with
// the same token, so each scrape need not cost two reviews; a revoked
// token or binding stops working within a minute.
const (
	allowTTL   = time.Minute
	denyTTL    = 10 * time.Second
	cacheSize  = 1024
	reviewTime = 10 * time.Second
)

// Anyone who reaches the port may send tokens; each unknown one would cost
// the API server two reviews. Tokens longer than any the API server issues
// are refused unread, and reviews of tokens not answered from the cache
// are rate-limited: a flood of random tokens gets 429s, not the API
// server's time. Scrapers, whose tokens are cached, are not slowed.
const (
	maxTokenBytes = 16 << 10
	reviewRate    = 5 // per second
	reviewBurst   = 20
)

// FilterProvider is a metricsserver.Options.FilterProvider.
func FilterProvider(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the SubjectAccessReview client: %w", err)
	}
	r := NewReviewer(authn.TokenReviews(), authz.SubjectAccessReviews())
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return r.Handler(log, next), nil
	}, nil
}

// Reviewer asks the API server who a token belongs to and what that user
// may do, and remembers the answers for a while.
type Reviewer struct {
	tokens  authenticationclient.TokenReviewInterface
	access  authorizationclient.SubjectAccessReviewInterface
	answers *cache.LRUExpireCache
	reviews *rate.Limiter
}

// NewReviewer returns a Reviewer that sends its reviews to these clients.
func NewReviewer(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface) *Reviewer {
	return &Reviewer{tokens: tokens, access: access, answers: cache.NewLRUExpireCache(cacheSize),
		reviews: rate.NewLimiter(reviewRate, reviewBurst)}
}

// Decision is the outcome of reviewing one request.
type Decision struct {
	// Status is http.StatusOK, StatusUnauthorized, StatusForbidden, or
	// StatusTooManyRequests when the review was not made (reviewRate).
	Status int
	// User is the token's user name, when the token was accepted.
	User string
	// Reason is the API server's explanation of a denial, if it gave one.
	Reason string
}

// Review decides whether the bearer of token may send verb to path.
// Answers are cached under a hash of the token, never the token itself.
func (r *Reviewer) Review(ctx context.Context, token, verb, path string) (Decision, error) {
	if token == "" || len(token) > maxTokenBytes {
		return Decision{Status: http.StatusUnauthorized}, nil
	}
	key := fmt.Sprintf("%x %s %s", sha256.Sum256([]byte(token)), verb, path)
	if d, ok := r.answers.Get(key); ok {
		return d.(Decision), nil
	}
	if !r.reviews.Allow() {
		return Decision{Status: http.StatusTooManyRequests}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTime)
	defer cancel()
	d, err := r.review(ctx, token, verb, path)
	if err != nil {
		// Not cached: the next scrape asks again.
		return Decision{}, err
	}
	ttl := denyTTL
	if d.Status == http.StatusOK {
		ttl = allowTTL
	}
	r.answers.Add(key, d, ttl)
	return d, nil
}

func (r *Reviewer) review(ctx context.Context, token, verb, path string) (Decision, error) {
	tr, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return Decision{}, fmt.Errorf("reviewing the token: %w", err)
	}
	if !tr.Status.Authenticated {
		return Decision{Status: http.StatusUnauthorized}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return Decision{}, fmt.Errorf("reviewing access of %s to %s: %w", u.Username, path, err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return Decision{Status: http.StatusForbidden, User: u.Username, Reason: sar.Status.Reason}, nil
	}
	return Decision{Status: http.StatusOK, User: u.Username}, nil
}

// Handler serves next to the requests Review allows.
func (r *Reviewer) Handler(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d, err := r.Review(req.Context(), bearerToken(req), strings.ToLower(req.Method), req.URL.Path)
		switch {
		case err != nil:
			log.Error(err, "Could not review a metrics request")
			http.Error(w, "Could not review the request with the API server", http.StatusInternalServerError)
		case d.Status == http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many requests with tokens not seen before; retry in a second", http.StatusTooManyRequests)
		case d.Status == http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Unauthorized: send a bearer token the API server accepts, e.g. a ServiceAccount's", http.StatusUnauthorized)
		case d.Status == http.StatusForbidden:
			log.V(4).Info("Metrics request denied", "user", d.User, "path", req.URL.Path, "reason", d.Reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s; bind it to a role that allows the non-resource URL",
				d.User, strings.ToLower(req.Method), req.URL.Path), http.StatusForbidden)
		default:
			next.ServeHTTP(w, req)
		}
	})
}

func bearerToken(req *http.Request) string {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
