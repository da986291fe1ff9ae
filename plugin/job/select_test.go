package job

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/torus-mpi/torus/api"
)

func TestSelector(t *testing.T) {
	mpiJob := labels.Set{api.LabelImplementation: "OpenMPI", "team": "a"}
	other := labels.Set{"team": "a"}
	cases := map[string]struct {
		user     string
		wantErr  bool
		mpiMatch bool
	}{
		"every MPI job":                  {user: "", mpiMatch: true},
		"MPI jobs of the selector":       {user: "team=a", mpiMatch: true},
		"none outside the selector":      {user: "team=b"},
		"a selector that does not parse": {user: "team in (a", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sel, err := Selector(tc.user)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Selector(%q) error = %v, want error %v", tc.user, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got := sel.Matches(mpiJob); got != tc.mpiMatch {
				t.Errorf("matches an MPI job = %v, want %v", got, tc.mpiMatch)
			}
			if sel.Matches(other) {
				t.Errorf("%s matches a TrainJob that is not an MPI job", sel)
			}
		})
	}
}
