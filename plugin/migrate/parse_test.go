package migrate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitDocuments(t *testing.T) {
	type doc struct {
		Line int
		Text string
		JSON bool
	}
	cases := []struct {
		name    string
		in      string
		want    []doc
		wantErr string
	}{
		{"one document", "a: 1\nb: 2\n", []doc{{1, "a: 1\nb: 2\n", false}}, ""},
		{"leading separator", "---\na: 1\n", []doc{{2, "a: 1\n", false}}, ""},
		{"three documents and a comment", "a: 1\n---\n# c\n---  # note\nb: 2\n", []doc{
			{1, "a: 1\n", false}, {3, "# c\n", false}, {4, "# note\nb: 2\n", false},
		}, ""},
		{"document end marker", "a: 1\n...\n---\nb: 2", []doc{{1, "a: 1\n", false}, {4, "b: 2", false}}, ""},
		{"CRLF and a byte order mark", "\ufeffa: 1\r\n---\r\nb: 2\r\n", []doc{{1, "a: 1\r\n", false}, {3, "b: 2\r\n", false}}, ""},
		{"dashes inside a scalar are not a separator", "a: |\n  ---x\n----\n", []doc{{1, "a: |\n  ---x\n----\n", false}}, ""},
		{"a JSON stream", "{\"a\": 1}\n\n{\"b\":\n 2}\n", []doc{{1, `{"a": 1}`, true}, {3, "{\"b\":\n 2}", true}}, ""},
		{"a JSON array", "[\n {\"a\": 1},\n {\"b\": 2}\n]\n", []doc{{2, `{"a": 1}`, true}, {3, `{"b": 2}`, true}}, ""},
		{"a cut JSON object", "{\"a\": 1}\n{\"b\": [1,\n", []doc{{1, `{"a": 1}`, true}}, "malformed JSON: unexpected end of JSON input"},
		{"a JSON syntax error", "{\"a\": 1}\n{\"b\" 2}\n", []doc{{1, `{"a": 1}`, true}}, "malformed JSON: invalid character '2' after object key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := splitDocuments([]byte(tc.in))
			var got []doc
			for _, d := range docs {
				got = append(got, doc{d.line, string(d.text), d.json})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("documents (-want,+got):\n%s", diff)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestFileLines checks that findings point at the line of their field,
// and errors at the line of the problem, across documents and formats.
func TestFileLines(t *testing.T) {
	const mpijob = `apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: j
spec:
  runPolicy:
    cleanPodPolicy: None
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - image: x
    Worker:
      replicas: 1
      template:
        spec:
          containers:
          - image: x
            bogus: 1
`
	cases := []struct {
		name string
		in   string
		// want maps "level field" to the line expected.
		want map[string]int
	}{
		{"fields of the first document", mpijob, map[string]int{
			"warning spec.runPolicy.cleanPodPolicy":                                 7,
			"warning spec.mpiReplicaSpecs.Worker.template.spec.containers[0].bogus": 21,
		}},
		{"fields of a later document", "kind: ConfigMap\napiVersion: v1\n---\n" + mpijob, map[string]int{
			"warning spec.runPolicy.cleanPodPolicy": 10,
		}},
		{"a syntax error", "a: 1\n---\nkind: [x\n", map[string]int{"error ": 3}},
		{"a type error", "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata:\n  name: j\nspec:\n  mpiReplicaSpecs:\n    Worker:\n      replicas: two\n",
			map[string]int{"error spec.mpiReplicaSpecs.replicas": 8}},
		{"a duplicate key", "a: 1\na: 2\n", map[string]int{"error ": 2}},
		{"a scalar document", "just text\n", map[string]int{"error ": 1}},
		{"JSON", "{\"apiVersion\": \"kubeflow.org/v2beta1\", \"kind\": \"MPIJob\", \"metadata\": {\"name\": \"j\"},\n \"spec\": {\"runPolicy\": {\"cleanPodPolicy\": \"None\"}}}",
			map[string]int{"error spec.mpiReplicaSpecs": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]int{}
			for _, it := range File("f.yaml", []byte(tc.in), Options{}) {
				for _, f := range it.Findings {
					key := f.Level.String() + " " + f.Field
					if _, ok := tc.want[key]; ok {
						got[key] = f.Line
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPassThrough(t *testing.T) {
	in := "# head\napiVersion: v1\nkind: ConfigMap   # inline\nmetadata:\n  name: c\n---\napiVersion: kubeflow.org/v1\nkind: MPIJob\nmetadata:\n  name: old\n"
	items := File("f.yaml", []byte(in), Options{})
	var out strings.Builder
	if err := writeYAML(&out, items); err != nil {
		t.Fatal(err)
	}
	var levels []Level
	for _, it := range items {
		for _, f := range it.Findings {
			levels = append(levels, f.Level)
		}
	}
	got := []any{out.String(), levels}
	want := []any{in, []Level{LevelNote, LevelWarning}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestParseFieldPath(t *testing.T) {
	cases := map[string]string{
		"spec.runPolicy":                       "spec.runPolicy",
		"spec.containers[0].env[12].name":      "spec.containers[0].env[12].name",
		"spec.mpiReplicaSpecs[Worker].x":       "spec.mpiReplicaSpecs[Worker].x",
		"metadata.labels[a.b/c]":               "metadata.labels[a.b/c]",
		"spec.mpiReplicaSpecs.Worker.replicas": "spec.mpiReplicaSpecs.Worker.replicas",
	}
	for in, want := range cases {
		if diff := cmp.Diff(want, parseFieldPath(in).String()); diff != "" {
			t.Errorf("parseFieldPath(%q) (-want,+got):\n%s", in, diff)
		}
	}
}
