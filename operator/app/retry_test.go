package app

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
