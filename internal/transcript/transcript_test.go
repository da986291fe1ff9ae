package transcript

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	doc := "# Title\n" +
		"```sh\n$ not run\n```\n" +
		"```console\n" +
		"$ kubectl mpi run pi \\\n" +
		"    --workers 2\n" +
		"trainjob.trainer.kubeflow.org/pi created\n" +
		"$ kubectl mpi wait pi\n" +
		"...\n" +
		"done   \n" +
		"```\n" +
		"text\n" +
		"```console\n$ true\n```\n"
	got, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Line: 6, Command: "kubectl mpi run pi \\\n    --workers 2", Output: []string{"trainjob.trainer.kubeflow.org/pi created"}},
		{Line: 9, Command: "kubectl mpi wait pi", Output: []string{"...", "done"}},
		{Line: 15, Command: "true"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want,+got):\n%s", diff)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"output before a command": "```console\norphan\n$ true\n```\n",
		"unclosed block":          "```console\n$ true\n",
		"block ends mid-command":  "```console\n$ echo \\\n```\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(strings.NewReader(doc)); err == nil {
				t.Error("parsed")
			}
		})
	}
}

func TestMatch(t *testing.T) {
	cases := []struct {
		name string
		want []string
		got  string
		ok   bool
	}{
		{"same", []string{"a", "b"}, "a\nb\n", true},
		{"a line too many", []string{"a"}, "a\nb\n", false},
		{"a line missing", []string{"a", "b"}, "a\n", false},
		{"nothing printed", nil, "", true},
		{"ellipsis takes none", []string{"a", "...", "b"}, "a\nb\n", true},
		{"ellipsis takes several", []string{"a", "...", "d"}, "a\nb\nc\nd\n", true},
		{"ellipsis at the end", []string{"a", "..."}, "a\nb\n", true},
		{"ellipsis keeps the order", []string{"b", "...", "a"}, "a\nb\n", false},
		{"figures by shape", []string{"epoch 3/30 loss 0.1820 test accuracy 0.9393"}, "epoch 7/30 loss 0.0720 test accuracy 0.9618\n", true},
		{"durations by shape", []string{"MPI job pi completed in 20s"}, "MPI job pi completed in 1m5s\n", true},
		{"words are not figures", []string{"pi completed"}, "pi failed\n", false},
		{"pod suffixes", []string{"pod pi-node-0-0-mrh8k"}, "pod pi-node-0-0-x2b9q\n", true},
		{"digests", []string{"sha256 " + strings.Repeat("a", 64)}, "sha256 " + strings.Repeat("0", 64) + "\n", true},
		{"times", []string{"Created: 2026-11-26T21:29:03Z"}, "Created: 2027-01-02T03:04:05Z\n", true},
		{"trailing blanks", []string{"a"}, "a  \n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Match(tc.want, tc.got); got != tc.ok {
				t.Errorf("Match(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.ok)
			}
		})
	}
}
