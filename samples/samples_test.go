package samples

import (
	"os"
	"strings"
	"testing"
)

// The torus-python runtime names the image released with the operator:
// the same version, so that an operator of a release installs a runtime
// whose image that release published.
func TestPythonRuntimeImageIsTheRelease(t *testing.T) {
	data, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := "ghcr.io/torus-mpi/mpi-python:v" + strings.TrimSpace(string(data))
	rt, err := Runtime("torus-python")
	if err != nil {
		t.Fatal(err)
	}
	jobs := rt.Spec.Template.Spec.ReplicatedJobs
	if len(jobs) == 0 {
		t.Fatal("torus-python has no replicated jobs")
	}
	for _, rj := range jobs {
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Image != want {
				t.Errorf("replicated job %s, container %s: image %q, want %q (bump the sample with VERSION)", rj.Name, c.Name, c.Image, want)
			}
		}
	}
}
