package migrate

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestNameProblems(t *testing.T) {
	cases := []struct {
		name    string
		workers int32
		want    int
		wantSub string
		suggest string
	}{
		{"pi", 2, 0, "", ""},
		{strings.Repeat("a", 44), 2, 0, "", ""},
		{strings.Repeat("a", 45), 2, 1, "is 45 characters; an MPI job needs at most 44", strings.Repeat("a", 44)},
		{strings.Repeat("a", 51), 2, 1, "is 51 characters; an MPI job needs at most 44", strings.Repeat("a", 44)},
		{strings.Repeat("a", 64), 2, 1, "at most 63", strings.Repeat("a", 44)},
		{"my.job", 2, 1, `contains "."`, "my-job"},
		{"MyJob", 2, 1, "not an RFC 1035 label", "myjob"},
		{"1job", 2, 1, "not an RFC 1035 label", "job-1job"},
		{"job-", 2, 1, "not an RFC 1035 label", "job"},
		{"", 2, 1, "is empty", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := nameProblems(tc.name, tc.workers)
			joined := strings.Join(problems, "; ")
			got := []any{len(problems), strings.Contains(joined, tc.wantSub)}
			if diff := cmp.Diff([]any{tc.want, true}, got); diff != "" {
				t.Errorf("nameProblems(%q) = %q (-want,+got):\n%s", tc.name, problems, diff)
			}
			if tc.suggest == "" {
				return
			}
			s := suggestName(tc.name, tc.workers)
			if diff := cmp.Diff(tc.suggest, s); diff != "" {
				t.Errorf("suggestName (-want,+got):\n%s", diff)
			}
			if p := nameProblems(s, tc.workers); len(p) > 0 {
				t.Errorf("the suggestion %q is itself refused: %q", s, p)
			}
		})
	}
}

// TestMaxTrainJobNameLengthFitsPodNames checks the shared limit against the pod names JobSet
// makes, for many sizes.
func TestMaxTrainJobNameLengthFitsPodNames(t *testing.T) {
	for _, workers := range []int32{1, 9, 10, 100, 99999, 100000, 1000000} {
		limit := mpi.MaxTrainJobNameLength(workers)
		name := strings.Repeat("a", limit)
		for _, pod := range []string{name + "-launcher-0-0-abcde", name + "-node-0-" + itoa(workers-1) + "-abcde"} {
			if errs := validation.IsDNS1035Label(pod); len(errs) > 0 {
				t.Errorf("workers=%d: pod %q at the limit is invalid: %v", workers, pod, errs)
			}
		}
		longer := strings.Repeat("a", limit+1)
		ok := len(validation.IsDNS1035Label(longer+"-launcher-0-0-abcde")) == 0 &&
			len(validation.IsDNS1035Label(longer+"-node-0-"+itoa(workers-1)+"-abcde")) == 0
		if ok {
			t.Errorf("workers=%d: limit %d is not the longest", workers, limit)
		}
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
