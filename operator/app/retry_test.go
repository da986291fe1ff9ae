package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Start-up retries what the API server answered, or failed to, and nothing
// else: a bad flag fails at once.
func TestFromAPIServer(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"discovery answered with an error, wrapped as controller-runtime does": {
			fmt.Errorf("creating manager: failed to determine if *v1.Pod is namespaced: failed to get restmapping: failed to get server groups: %w",
				apierrors.NewGenericServerResponse(500, "get", schema.GroupResource{}, "", "unknown", 0, true)), true},
		"no answer":            {fmt.Errorf("creating manager: %w", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: errors.New("connection refused")}), true},
		"a flag out of bounds": {errors.New("--max-nodes=0: set it between 1 and 65536"), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := fromAPIServer(tc.err); got != tc.want {
				t.Errorf("fromAPIServer(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// Every start-up request is retried alike: the chaos suite's fault proxy
// once failed the check for upstream's controller, after the manager was
// built, and the operator exited.
func TestRetryAPI(t *testing.T) {
	serverError := apierrors.NewInternalError(errors.New("injected"))
	upstream := &UpstreamInstalledError{Namespace: "kubeflow-system", Name: "kubeflow-trainer-controller-manager"}
	backoff := wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 4}
	for name, tc := range map[string]struct {
		answers   []error // one per call; the last repeats
		wantCalls int
		want      error
	}{
		"answered at last":               {answers: []error{serverError, serverError, nil}, wantCalls: 3},
		"never answered: the last error": {answers: []error{serverError}, wantCalls: 4, want: serverError},
		"upstream installed: at once":    {answers: []error{upstream}, wantCalls: 1, want: upstream},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := retryAPI(context.Background(), backoff, func() error {
				a := tc.answers[min(calls, len(tc.answers)-1)]
				calls++
				return a
			})
			if !errors.Is(err, tc.want) {
				t.Errorf("retryAPI() = %v, want %v", err, tc.want)
			}
			if calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
		})
	}
}
