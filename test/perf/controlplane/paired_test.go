package main

import "testing"

func TestIdleSeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		stat string
		want [2]float64
	}{
		{
			name: "both cores",
			stat: "cpu  100 0 50 900 20 0 1 0 0 0\n" +
				"cpu0 50 0 25 400 10 0 1 0 0 0\n" +
				"cpu1 50 0 25 500 10 0 0 0 0 0\n" +
				"intr 12345\n",
			want: [2]float64{4.1, 5.1},
		},
		{
			name: "a third core is left out, the sum line too",
			stat: "cpu  1 1 1 9000 0\ncpu0 1 1 1 100 0 0\ncpu2 1 1 1 700 0 0\n",
			want: [2]float64{1, 0},
		},
		{
			name: "a malformed line reads 0",
			stat: "cpu0 1 1 1 x 0 0\ncpu1 1 1 1 200 0 0\n",
			want: [2]float64{0, 2},
		},
		{name: "nothing", stat: "", want: [2]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := idleSeconds(tc.stat); got != tc.want {
				t.Errorf("idleSeconds() = %v, want %v", got, tc.want)
			}
		})
	}
}
