package main

import "testing"

func TestFindings(t *testing.T) {
	cases := map[string]bool{
		"measured in session 13's cold run": true,
		"as issue 14 asks":                  true,
		"the limit (issue 19) holds":        true,
		"Measured here with warm caches":    true,
		"on this 2-core machine":            true,
		"reported blocked":                  true,
		"it used to set the port":           true,
		"upstream's env does not reach workers (kubeflow/trainer#3427)": false,
		"an interactive session runs raw":                               false,
		"issues of every project say so":                                false,
		"the key is used to sign requests":                              false,
		"at N = 10,000 on 2 cores, three runs":                          false,
	}
	for line, want := range cases {
		if got := len(findings(line)) > 0; got != want {
			t.Errorf("%q: found = %v, want %v (%v)", line, got, want, findings(line))
		}
	}
}
