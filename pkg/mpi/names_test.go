package mpi

import (
	"strings"
	"testing"
)

func TestTrainJobNameProblems(t *testing.T) {
	cases := map[string]struct {
		name    string
		workers int32
		want    []string // substrings, one a problem; none: a valid name
	}{
		"valid":                  {name: "pi", workers: 2},
		"longest for 2 workers":  {name: strings.Repeat("a", 44), workers: 2},
		"one over for 2 workers": {name: strings.Repeat("a", 45), workers: 2, want: []string{"is 45 characters; an MPI job needs at most 44 so that pod names such as \"" + strings.Repeat("a", 45) + "-launcher-0-0-abcde\""}},
		// Worker indexes of 6 digits make node pods' names the longer.
		"longest for a million workers": {name: strings.Repeat("a", 43), workers: 1000000},
		"too long for a million":        {name: strings.Repeat("a", 44), workers: 1000000, want: []string{"needs at most 43"}},
		"over a DNS label":              {name: strings.Repeat("a", 64), workers: 1, want: []string{"is 64 characters; a TrainJob name is an RFC 1035 label of at most 63"}},
		"a dot":                         {name: "pi.v2", workers: 1, want: []string{`contains "."`}},
		"upper case":                    {name: "Pi", workers: 1, want: []string{"is not an RFC 1035 label"}},
		"a leading digit":               {name: "1pi", workers: 1, want: []string{"is not an RFC 1035 label"}},
		"a trailing dash":               {name: "pi-", workers: 1, want: []string{"is not an RFC 1035 label"}},
		"empty":                         {name: "", workers: 1, want: []string{"is not an RFC 1035 label"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := TrainJobNameProblems(tc.name, tc.workers)
			if len(got) != len(tc.want) {
				t.Fatalf("TrainJobNameProblems(%q, %d) = %q, want %d problems", tc.name, tc.workers, got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
