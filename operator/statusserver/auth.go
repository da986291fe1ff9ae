package statusserver

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	serviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// The extra fields TokenReview gives a token bound to a pod.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// Bounds of the reviewed tokens kept: a token is reviewed again after
// reviewTTL (its pod is looked up at every report), and at most maxReviews
// are kept (a job's pods each have one). One address may have reviews
// asked at sourceReviewRate (burst sourceReviewBurst), so that a pod
// sending tokens the server has not seen cannot spend the reviews every
// other pod needs; maxSources addresses are kept.
const (
	reviewTTL         = 5 * time.Minute
	maxReviews        = 8192
	sourceReviewRate  = 2
	sourceReviewBurst = 10
	maxSources        = 4096
	// maxToken is longer than any token the API server issues: a longer
	// one is refused without a review.
	maxToken = 16 << 10
)

// authenticator says whether a token may report for a job.
type authenticator struct {
	client client.Client
	reader client.Reader
	// api reads the pods the cache does not hold: the cache holds only
	// Torus's labelled pods, and the pods of the jobs on upstream's
	// framework carry no Torus label.
	api     client.Reader
	limiter *rate.Limiter
	now     func() time.Time

	mu      sync.Mutex
	reviews map[[sha256.Size]byte]review
	sources map[string]*rate.Limiter
}

// review is what TokenReview said of a token for one job's audience, and
// the controller of the pod it is bound to (a Job), read once.
type review struct {
	namespace, pod string
	uid            types.UID
	job            metav1.OwnerReference
	until          time.Time
}

// refusal is a report refused, with the code and words its caller gets.
type refusal struct {
	code   int
	reason metav1.StatusReason
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func forbidden(format string, args ...any) error {
	return &refusal{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden, msg: fmt.Sprintf(format, args...)}
}

func newAuthenticator(c client.Client, reader, api client.Reader, limiter *rate.Limiter) *authenticator {
	return &authenticator{client: c, reader: reader, api: api, limiter: limiter, now: time.Now,
		reviews: map[[sha256.Size]byte]review{}, sources: map[string]*rate.Limiter{}}
}

// bearer is the token of an Authorization header.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// authorize admits a token, sent from address source, for job, or says
// why not (a *refusal).
func (a *authenticator) authorize(ctx context.Context, token, source string, job types.NamespacedName) error {
	if len(token) > maxToken {
		return forbidden("the token is longer than any the API server issues")
	}
	rv, err := a.review(ctx, token, source, job)
	if err != nil {
		return err
	}
	if rv.namespace != job.Namespace {
		return forbidden("the token is of namespace %s, not the job's (%s)", rv.namespace, job.Namespace)
	}
	return a.descends(ctx, rv, job)
}

// review asks TokenReview about a token, for the job's audience, or
// answers from a review made within reviewTTL.
func (a *authenticator) review(ctx context.Context, token, source string, job types.NamespacedName) (review, error) {
	audience := trainerstatus.Audience(job.Namespace, job.Name)
	key := sha256.Sum256([]byte(audience + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	rv, ok := a.reviews[key]
	a.mu.Unlock()
	if ok && now.Before(rv.until) {
		return rv, nil
	}
	if !a.sourceAllows(source) || !a.limiter.Allow() {
		return review{}, &refusal{code: http.StatusTooManyRequests, reason: metav1.StatusReasonTooManyRequests, msg: "too many new tokens at once; try again in a second"}
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := a.client.Create(ctx, tr); err != nil {
		return review{}, fmt.Errorf("reviewing a token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, audience) {
		return review{}, forbidden("the token is not valid for TrainJob %s: use the token projected for it ($%s)", job, trainerstatus.EnvToken)
	}
	ns, _, err := serviceaccount.SplitUsername(st.User.Username)
	if err != nil {
		return review{}, forbidden("the token is not a ServiceAccount's")
	}
	pod, uid := first(st.User.Extra[extraPodName]), first(st.User.Extra[extraPodUID])
	if pod == "" || uid == "" {
		return review{}, forbidden("the token is not bound to a pod: use the token projected for the job ($%s)", trainerstatus.EnvToken)
	}
	rv = review{namespace: ns, pod: pod, uid: types.UID(uid), until: now.Add(reviewTTL)}
	if rv.job, err = a.podJob(ctx, rv); err != nil {
		return review{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.reviews) >= maxReviews {
		for k, old := range a.reviews {
			if !now.Before(old.until) {
				delete(a.reviews, k)
			}
		}
		for k := range a.reviews {
			if len(a.reviews) < maxReviews {
				break
			}
			delete(a.reviews, k)
		}
	}
	a.reviews[key] = rv
	return rv, nil
}

// podJob is the Job that controls the token's pod, by the pod's UID: from
// the cache, else from the API server. A token costs this read once per
// review, so pods the cache does not hold cost the API server no more than
// the reviews do.
func (a *authenticator) podJob(ctx context.Context, rv review) (metav1.OwnerReference, error) {
	refuse := forbidden("pod %s/%s is not a Job's pod", rv.namespace, rv.pod)
	key := types.NamespacedName{Namespace: rv.namespace, Name: rv.pod}
	var pod corev1.Pod
	err := a.reader.Get(ctx, key, &pod)
	if apierrors.IsNotFound(err) {
		err = a.api.Get(ctx, key, &pod)
	}
	switch {
	case apierrors.IsNotFound(err):
		return metav1.OwnerReference{}, refuse
	case err != nil:
		return metav1.OwnerReference{}, fmt.Errorf("reading pod %s: %w", key, err)
	case pod.UID != rv.uid:
		return metav1.OwnerReference{}, refuse
	}
	c := metav1.GetControllerOfNoCopy(&pod)
	if c == nil || c.APIVersion != batchv1.SchemeGroupVersion.String() || c.Kind != "Job" {
		return metav1.OwnerReference{}, refuse
	}
	return *c, nil
}

// descends checks that the token's pod is one of the job's: its controller
// is a Job whose controller is a JobSet that the TrainJob controls, each
// by UID.
func (a *authenticator) descends(ctx context.Context, rv review, job types.NamespacedName) error {
	refuse := func() error {
		return forbidden("pod %s/%s is not a pod of TrainJob %s", rv.namespace, rv.pod, job)
	}
	c := &rv.job
	var j batchv1.Job
	if err := a.get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: c.Name}, &j); err != nil || j.UID != c.UID {
		return orRefuse(err, refuse)
	}
	if c = metav1.GetControllerOfNoCopy(&j); c == nil || c.Kind != "JobSet" || c.Name != job.Name {
		return refuse()
	}
	var js jobsetv1alpha2.JobSet
	if err := a.get(ctx, job, &js); err != nil || js.UID != c.UID {
		return orRefuse(err, refuse)
	}
	var tj trainer.TrainJob
	if err := a.get(ctx, job, &tj); err != nil {
		return orRefuse(err, refuse)
	}
	if !metav1.IsControlledBy(&js, &tj) {
		return refuse()
	}
	return nil
}

func (a *authenticator) get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	if err := a.reader.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return nil
}

// orRefuse refuses for a missing object, and passes any other error on.
func orRefuse(err error, refuse func() error) error {
	if err == nil || apierrors.IsNotFound(err) {
		return refuse()
	}
	return err
}

func first(v authenticationv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// sourceAllows takes one review from the address's share.
func (a *authenticator) sourceAllows(source string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.sources[source]
	if !ok {
		if len(a.sources) >= maxSources {
			// Addresses come and go with pods: start the shares afresh
			// rather than keep every address ever seen.
			clear(a.sources)
		}
		l = rate.NewLimiter(sourceReviewRate, sourceReviewBurst)
		a.sources[source] = l
	}
	return l.Allow()
}
