package main

import (
	"slices"
	"testing"
)

func TestRunsAt(t *testing.T) {
	sizes := []int{100, 500, 1000, 10000}
	tests := []struct {
		name string
		c    contender
		want []int
	}{
		{"every N", contender{}, []int{100, 500, 1000, 10000}},
		{"up to MaxN", contender{MaxN: 1000}, []int{100, 500, 1000}},
		{"largest only", contender{LargestOnly: true}, []int{10000}},
		{"largest up to MaxN", contender{LargestOnly: true, MaxN: 1000}, []int{1000}},
		{"MaxN below every N", contender{LargestOnly: true, MaxN: 50}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, n := range sizes {
				if tt.c.runsAt(n, sizes) {
					got = append(got, n)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("runs at %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("runs at %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		xs   []float64
		want string
	}{
		{[]float64{2.5}, "2.50"},
		{[]float64{2.63, 2.4, 2.51}, "2.51 (median of 3 runs: 2.63, 2.40, 2.51)"},
		{[]float64{1, 2, 3, 10}, "2.50 (median of 4 runs: 1.00, 2.00, 3.00, 10.00)"},
	}
	for _, tt := range tests {
		if got := spread(tt.xs); got != tt.want {
			t.Errorf("spread(%v) = %q, want %q", tt.xs, got, tt.want)
		}
	}
}

func TestRatiosPairRuns(t *testing.T) {
	torus, upstream := contender{Name: "torus"}, contender{Name: "upstream"}
	rep := &report{results: []*result{
		{Contender: torus, N: 10, Run: 1, APICPU: 1},
		{Contender: upstream, N: 10, Run: 1, APICPU: 4},
		{Contender: torus, N: 10, Run: 2, APICPU: 2},
		{Contender: upstream, N: 10, Run: 2, Err: "failed"},
		{Contender: torus, N: 10, Run: 3, APICPU: 3},
		{Contender: upstream, N: 10, Run: 3, APICPU: 6},
	}}
	got := rep.ratios("torus", "upstream", 10, func(a, b *result) float64 { return a.APICPU / b.APICPU })
	want := []float64{0.25, 0.5}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ratios = %v, want %v (a failed run pairs with nothing)", got, want)
	}
}

func TestMakesConfigMap(t *testing.T) {
	tests := []struct {
		c    contender
		want bool
	}{
		{contender{Kind: kindUpstream}, true},
		{contender{Kind: kindFloor}, true},
		{contender{Kind: kindFloor, TwoObjects: true}, false},
		{contender{Kind: kindTorus}, false},
	}
	for _, tt := range tests {
		if got := tt.c.makesConfigMap(); got != tt.want {
			t.Errorf("%+v.makesConfigMap() = %v, want %v", tt.c, got, tt.want)
		}
	}
}

func TestRunOrder(t *testing.T) {
	cs := []contender{{Name: "floor2"}, {Name: "torus"}, {Name: "upstream"}}
	tests := []struct {
		run  int
		want []string
	}{
		{1, []string{"floor2", "torus", "upstream"}},
		{2, []string{"upstream", "torus", "floor2"}},
		{3, []string{"floor2", "torus", "upstream"}},
		{4, []string{"upstream", "torus", "floor2"}},
	}
	for _, tt := range tests {
		got := runOrder(cs, tt.run)
		names := make([]string, len(got))
		for i, c := range got {
			names[i] = c.Name
		}
		if !slices.Equal(names, tt.want) {
			t.Errorf("run %d: order %v, want %v", tt.run, names, tt.want)
		}
	}
	if cs[0].Name != "floor2" {
		t.Errorf("runOrder changed its argument: %v", cs)
	}
}
