package webhook

import (
	"context"
	"errors"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reader answers every Get with err, or with an object carrying the
// reader's name, and counts its reads.
type reader struct {
	name  string
	err   error
	reads int
}

func (r *reader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	if r.err != nil {
		return r.err
	}
	obj.SetAnnotations(map[string]string{"read-from": r.name})
	return nil
}

func (r *reader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

func TestCacheFirst(t *testing.T) {
	gone := apierrors.NewNotFound(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "clustertrainingruntimes"}, "r")
	cases := map[string]struct {
		cacheErr, apiErr error
		wantFrom         string
		wantErr          func(error) bool
		wantAPIReads     int
	}{
		"cached: the API server is not asked":   {wantFrom: "cache"},
		"not cached yet: the API server has it": {cacheErr: gone, wantFrom: "api", wantAPIReads: 1},
		"cache not started":                     {cacheErr: &cache.ErrCacheNotStarted{}, wantFrom: "api", wantAPIReads: 1},
		"nowhere: the API server's NotFound":    {cacheErr: gone, apiErr: gone, wantErr: apierrors.IsNotFound, wantAPIReads: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, a := &reader{name: "cache", err: tc.cacheErr}, &reader{name: "api", err: tc.apiErr}
			var rt trainer.ClusterTrainingRuntime
			err := cacheFirst{cache: c, api: a}.Get(context.Background(), client.ObjectKey{Name: "r"}, &rt)
			switch {
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("err = %v", err)
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr == nil && rt.Annotations["read-from"] != tc.wantFrom:
				t.Errorf("read from %q, want %q", rt.Annotations["read-from"], tc.wantFrom)
			}
			if a.reads != tc.wantAPIReads {
				t.Errorf("API server reads = %d, want %d", a.reads, tc.wantAPIReads)
			}
		})
	}
}
