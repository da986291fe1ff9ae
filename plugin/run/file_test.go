package run

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoad(t *testing.T) {
	mpijob, err := os.ReadFile("testdata/mpijob-pi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	trainJob := `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: pi
spec:
  runtimeRef:
    name: torus-openmpi
`
	cases := map[string]struct {
		input     string
		wantObjs  []string
		wantErrs  []string
		wantNotes bool
	}{
		"a TrainJob": {
			input:    trainJob,
			wantObjs: []string{"TrainJob pi at jobs.yaml:1: TrainJob pi"},
		},
		"a List of TrainJobs in JSON": {
			input: `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"a"},"spec":{"runtimeRef":{"name":"x"}}},
{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"b"},"spec":{"runtimeRef":{"name":"x"}}}]}`,
			wantObjs: []string{
				"TrainJob a at jobs.yaml:1: List item TrainJob a",
				"TrainJob b at jobs.yaml:1: List item TrainJob b",
			},
		},
		"an MPIJob is converted": {
			input:     string(mpijob),
			wantObjs:  []string{"TrainJob pi at jobs.yaml:1: MPIJob pi (converted to TrainJob pi)"},
			wantNotes: true,
		},
		"other kinds are refused, the rest is read": {
			input: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\n" + trainJob,
			wantObjs: []string{
				"TrainJob pi at jobs.yaml:6: TrainJob pi",
			},
			wantErrs: []string{"jobs.yaml:1: ConfigMap c: a ConfigMap (v1) is not an MPI job"},
		},
		"a TrainJob of another version": {
			input:    strings.Replace(trainJob, "v1alpha1", "v1", 1),
			wantErrs: []string{`jobs.yaml:1: TrainJob pi: apiVersion "trainer.kubeflow.org/v1": use trainer.kubeflow.org/v1alpha1`},
		},
		"malformed YAML names its line": {
			input:    trainJob + "---\nkind: TrainJob\n  bad: [\n",
			wantObjs: []string{"TrainJob pi at jobs.yaml:1: TrainJob pi"},
			wantErrs: []string{"jobs.yaml:10: document: error: malformed YAML"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, notes, errs := load("jobs.yaml", []byte(tc.input))
			var got []string
			for _, o := range objs {
				if o.Object.GetKind() == "TrainingRuntime" {
					continue
				}
				got = append(got, o.Object.GetKind()+" "+o.Object.GetName()+" at "+o.Where)
			}
			if diff := cmp.Diff(tc.wantObjs, got); diff != "" {
				t.Errorf("objects (-want,+got):\n%s", diff)
			}
			if len(errs) != len(tc.wantErrs) {
				t.Fatalf("errors = %v, want %d: %q", errs, len(tc.wantErrs), tc.wantErrs)
			}
			for i, want := range tc.wantErrs {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %q does not contain %q", errs[i], want)
				}
			}
			if tc.wantNotes && len(notes) == 0 {
				t.Error("no conversion notes, want the migrate findings worth reading")
			}
		})
	}
}
