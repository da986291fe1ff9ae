package console

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/torus-mpi/torus/pkg/version"
	"github.com/torus-mpi/torus/samples"
)

func TestObjects(t *testing.T) {
	for _, tc := range []struct {
		release, firstLink string
	}{
		{"v0.2.0", "https://github.com/torus-mpi/torus/releases/download/v0.2.0/kubectl-mpi_v0.2.0_linux_amd64.tar.gz"},
		// A build without a release links the latest one.
		{"dev", "https://github.com/torus-mpi/torus/releases/latest"},
	} {
		objs, err := Objects(tc.release)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(samples.TrainJobNames()) + 1; len(objs) != want {
			t.Fatalf("%d objects, want a sample per TrainJob and the download: %d", len(objs), want)
		}
		for _, o := range objs[:len(objs)-1] {
			title, _, _ := unstructured.NestedString(o.Object, "spec", "title")
			desc, _, _ := unstructured.NestedString(o.Object, "spec", "description")
			if title == "" || strings.HasPrefix(title, "#") || !strings.Contains(desc, "runtime torus-") {
				t.Errorf("%s: title %q, description %q", o.GetName(), title, desc)
			}
		}
		links, _, _ := unstructured.NestedSlice(objs[len(objs)-1].Object, "spec", "links")
		if len(links) != len(version.Platforms) {
			t.Fatalf("%d links, want one per platform", len(links))
		}
		if got := links[0].(map[string]any)["href"]; got != tc.firstLink {
			t.Errorf("release %s: first link %v, want %s", tc.release, got, tc.firstLink)
		}
	}
}
