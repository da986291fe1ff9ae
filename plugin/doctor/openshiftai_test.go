package doctor

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDSCVersions(t *testing.T) {
	groups := map[string]bool{"datasciencecluster.opendatahub.io/v1": true, "datasciencecluster.opendatahub.io/v3": true,
		"datasciencecluster.opendatahub.io/v2": true, "dscinitialization.opendatahub.io/v2": true, "apps/v1": true}
	if diff := cmp.Diff([]string{"v3", "v2", "v1"}, dscVersions(groups)); diff != "" {
		t.Errorf("served versions, newest first (-want +got):\n%s", diff)
	}
	if got := dscVersions(map[string]bool{"apps/v1": true}); len(got) != 0 {
		t.Errorf("without OpenShift AI: %v, want none", got)
	}
}

func TestDSCVerdict(t *testing.T) {
	dsc := func(name, state string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{}}
		u.SetName(name)
		if state != "" {
			_ = unstructured.SetNestedField(u.Object, state, dscTrainerPath...)
		}
		return u
	}
	tests := []struct {
		name        string
		dscs        []unstructured.Unstructured
		err         error
		wantStatus  status
		wantMessage string
		wantFix     string
	}{
		{name: "the trainer component managed", dscs: []unstructured.Unstructured{dsc("default-dsc", "Managed")}, wantStatus: fail,
			wantMessage: "DataScienceCluster default-dsc runs OpenShift AI's own Trainer controller (spec.components.trainer.managementState: Managed)",
			wantFix:     `oc patch datasciencecluster default-dsc --type merge -p '{"spec":{"components":{"trainer":{"managementState":"Removed"}}}}'`},
		{name: "removed", dscs: []unstructured.Unstructured{dsc("default-dsc", "Removed")}, wantStatus: pass,
			wantMessage: "the trainer component of DataScienceCluster default-dsc (Removed) is not Managed"},
		{name: "unset", dscs: []unstructured.Unstructured{dsc("default-dsc", "")}, wantStatus: pass,
			wantMessage: "default-dsc (unset, which reads as Removed)"},
		{name: "one of two managed", dscs: []unstructured.Unstructured{dsc("b", "Removed"), dsc("a", "Managed")}, wantStatus: fail,
			wantMessage: "DataScienceCluster a runs", wantFix: "oc patch datasciencecluster a "},
		{name: "no DataScienceCluster", wantStatus: pass, wantMessage: "no DataScienceCluster: OpenShift AI runs no Trainer controller"},
		{name: "not allowed to read them", err: errors.New(`datascienceclusters.datasciencecluster.opendatahub.io is forbidden: User "alice" cannot list resource`),
			wantStatus: warn, wantMessage: "cannot read the DataScienceClusters: datascienceclusters.datasciencecluster.opendatahub.io is forbidden",
			wantFix: "ask a cluster administrator to check that each DataScienceCluster's spec.components.trainer.managementState is Removed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := dscVerdict(tc.dscs, tc.err)
			if r.Status != tc.wantStatus || !strings.Contains(r.Message, tc.wantMessage) || !strings.Contains(r.Fix, tc.wantFix) {
				t.Errorf("got %s %q (fix %q); want %s containing %q (fix containing %q)", r.Status, r.Message, r.Fix, tc.wantStatus, tc.wantMessage, tc.wantFix)
			}
			if (r.Status == pass) != (r.Fix == "") {
				t.Errorf("a pass has no fix and only a pass: %s with fix %q", r.Status, r.Fix)
			}
		})
	}
}
