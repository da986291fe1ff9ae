package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func TestOnlyRuntimeMissing(t *testing.T) {
	gk := trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind()
	ref := field.NewPath("spec", "runtimeRef")
	// As Torus's webhook words it.
	missing := func(name string) *field.Error {
		return field.Invalid(ref, name, fmt.Sprintf("%s %q not found: create it, or set spec.runtimeRef to an existing runtime", trainer.TrainingRuntimeKind, name))
	}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"the runtime is missing": {apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("pi")}), true},
		"wrapped":                {fmt.Errorf("creating: %w", apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("pi")})), true},
		"another runtime":        {apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("other")}), false},
		"and something else": {apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("pi"),
			field.Invalid(field.NewPath("spec", "trainer", "numNodes"), 0, "must be at least 1")}), false},
		"not invalid":      {apierrors.NewForbidden(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), "pi", errors.New("no")), false},
		"no causes":        {apierrors.NewInvalid(gk, "pi", nil), false},
		"not an API error": {errors.New(`TrainingRuntime "pi" not found`), false},
	}
	for name, tc := range cases {
		if got := OnlyRuntimeMissing(tc.err, "pi"); got != tc.want {
			t.Errorf("%s: OnlyRuntimeMissing(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}

// MPIJobs a server names with what no API server admits (a path, "..")
// are not converted and never become paths under --output-dir. The server
// here is an HTTP server on loopback answering the list as a hostile
// aggregated API server would; the client is the real dynamic client.
func TestReadRefusesNamesThatAreNotNames(t *testing.T) {
	list := map[string]any{
		"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJobList", "metadata": map[string]any{},
		"items": []any{
			map[string]any{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": map[string]any{"name": "../../etc/cron.d/x", "namespace": "team"}},
			map[string]any{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": map[string]any{"name": "pi", "namespace": ".."}},
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	defer srv.Close()
	client, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{Client: client, Namespace: "team", AllNamespaces: true, Out: io.Discard, ErrOut: io.Discard}
	inputs, err := c.Read(context.Background(), formatYAML, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) != 2 {
		t.Fatalf("inputs = %d, want 2", len(inputs))
	}
	for _, in := range inputs {
		if in.OutPath != "" {
			t.Errorf("an input got the path %q", in.OutPath)
		}
		if it := in.Items[0]; !it.Failed() || !strings.Contains(it.Findings[0].Message, "which are not valid names") {
			t.Errorf("item %s/%s: %+v", it.Namespace, it.Name, it.Findings)
		}
	}
}
