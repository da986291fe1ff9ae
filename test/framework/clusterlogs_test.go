package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClusterLogsNotable(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(component string, lines ...string) {
		f, err := os.OpenFile(filepath.Join(logs, component+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, l := range lines {
			if _, err := f.WriteString(l + "\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("kube-apiserver", `W1128 10:00:00.000000 1 dispatcher.go:1] before the spec`)
	write("etcd", `{"level":"warn","msg":"before the spec"}`)
	marks := MarkClusterLogs(dir)
	write("kube-apiserver",
		`I1128 10:00:01.000000 1 controller.go:1] "Starting"`,
		`W1128 10:00:02.000000 1 dispatcher.go:225] rejected by webhook "vtrainjob.torus-mpi.io": denied`,
		`W1128 10:00:03.000000 1 dispatcher.go:210] Failed calling webhook, failing closed mtrainjob.torus-mpi.io: context deadline exceeded`,
		`I1128 10:00:04.000000 1 trace.go:236] Trace[1234]: "Create" total time: 5003ms`)
	write("etcd", `{"level":"info","msg":"saved snapshot"}`, `{"level":"warn","msg":"slow fdatasync","took":"1.5s"}`)
	write("torus-operator", `{"level":"info","msg":"reconciled"}`)

	got := marks.Notable()
	want := map[string]string{
		"kube-apiserver": "W1128 10:00:03.000000 1 dispatcher.go:210] Failed calling webhook, failing closed mtrainjob.torus-mpi.io: context deadline exceeded\n" +
			`I1128 10:00:04.000000 1 trace.go:236] Trace[1234]: "Create" total time: 5003ms`,
		"etcd": `{"level":"warn","msg":"slow fdatasync","took":"1.5s"}`,
	}
	if len(got) != len(want) {
		t.Errorf("components = %v, want those of %v", keys(got), keys(want))
	}
	for c, w := range want {
		if got[c] != w {
			t.Errorf("%s:\n%s\nwant:\n%s", c, got[c], w)
		}
	}

	many := make([]string, 3*reportedLines)
	for i := range many {
		many[i] = `E1128 10:00:05.000000 1 x.go:1] error ` + strings.Repeat("x", i)
	}
	write("kueue", many...)
	lines := strings.Split((&ClusterLogs{dir: logs, offsets: map[string]int64{}}).Notable()["kueue"], "\n")
	if len(lines) != reportedLines || lines[len(lines)-1] != many[len(many)-1] {
		t.Errorf("kept %d lines ending %q, want the last %d", len(lines), lines[len(lines)-1], reportedLines)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
