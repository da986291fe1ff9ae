package run

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitWordsReadsWhatJoinWordsWrites(t *testing.T) {
	for _, words := range [][]string{
		{"mpirun", "-n", "4", "python3", "/opt/pi.py"},
		{"sh", "-c", "sleep 5 && exec mpirun -n 4 ./a.out"},
		{"echo", "it's", `"quoted"`, "back\\slash", ""},
	} {
		got, err := splitWords(joinWords(words))
		if err != nil {
			t.Fatalf("%q: %v", words, err)
		}
		if diff := cmp.Diff(words, got); diff != "" {
			t.Errorf("round trip of %q (-want,+got):\n%s", words, diff)
		}
	}
	for _, bad := range []string{`echo 'open`, `echo "open`, `echo \`} {
		if _, err := splitWords(bad); err == nil {
			t.Errorf("splitWords(%q) accepted it", bad)
		}
	}
}

// A form's problems are found without the cluster, each under its field,
// in run's own words.
func TestSubmitFormNamesTheField(t *testing.T) {
	tests := []struct {
		name string
		form Form
		want []FieldError
	}{{
		name: "workers and memory",
		form: Form{Name: "pi", Namespace: "ns", Workers: "0", Memory: "lots"},
		want: []FieldError{
			{Field: "memory", Message: `--memory="lots" is not a quantity: write it as Kubernetes does, e.g. 512Mi or 16Gi`},
			{Field: "workers", Message: "--workers=0: a job needs at least 1 worker"},
		},
	}, {
		name: "not a number",
		form: Form{Name: "pi", Namespace: "ns", SlotsPerWorker: "two"},
		want: []FieldError{{Field: "slots-per-worker", Message: `--slots-per-worker="two" is not a whole number`}},
	}, {
		name: "a name no host name can take, and a reserved variable",
		form: Form{Name: "Pi_Job", Namespace: "ns", Env: []string{"OMPI_MCA_orte_default_hostfile=/x"}},
		want: []FieldError{
			{Field: "name", Message: `job name "Pi_Job" is not an RFC 1035 label: use lowercase letters, digits and '-', start with a letter and end with a letter or digit`},
			{Field: "env", Message: "--env OMPI_MCA_orte_default_hostfile: Torus sets OMPI_MCA_orte_default_hostfile from the job's hostfile and SSH settings; remove it"},
		},
	}, {
		name: "an unclosed quote and no name",
		form: Form{Namespace: "ns", Command: "sh -c 'echo"},
		want: []FieldError{
			{Field: "command", Message: "the command has an unclosed ' quote"},
			{Field: "name", Message: "a job needs a name"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SubmitForm(context.Background(), nil, tt.form, true)
			if diff := cmp.Diff(tt.want, got.Errors); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}
