package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOrderConditionsShowsWhatHolds(t *testing.T) {
	c := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	cases := map[string]struct {
		in   []metav1.Condition
		last string
	}{
		"workers not scheduled":      {[]metav1.Condition{c("Created", "True"), c("Running", "False")}, "Created"},
		"running":                    {[]metav1.Condition{c("Created", "True"), c("Running", "True"), c("Suspended", "False")}, "Running"},
		"complete after running":     {[]metav1.Condition{c("Created", "True"), c("Running", "False"), c("Complete", "True")}, "Complete"},
		"failed, then Created again": {[]metav1.Condition{c("Failed", "True"), c("Created", "True")}, "Failed"},
		"suspended":                  {[]metav1.Condition{c("Suspended", "True"), c("Created", "False")}, "Suspended"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			orderConditions(tc.in)
			if got := tc.in[len(tc.in)-1].Type; got != tc.last {
				t.Errorf("last condition %s, want %s (%v)", got, tc.last, tc.in)
			}
		})
	}
}
