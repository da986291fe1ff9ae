package framework

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2"
)

// componentLogs are the local cluster's component logs a failed spec
// reports from (test/localcluster writes DIR/logs/NAME.log): the API server
// and etcd say when a request or a write was slow, the controllers why
// they failed. kwok's and the audit log are left out: every pod's every
// change is in them.
var componentLogs = []string{"kube-apiserver", "etcd", "torus-operator", "kueue", "jobset", "kube-controller-manager", "kube-scheduler"}

// reportedLines of each component are kept: the last ones, nearest the
// failure.
const reportedLines = 40

// notable matches a log line worth a failure report: klog's warnings and
// errors (W1128 ..., E1128 ...) and its traces of slow requests
// (Trace[...]), and JSON logs' warnings and errors.
var notable = regexp.MustCompile(`^[WEF]\d{4} |Trace\[\d+\]|"level":"(warn|error|dpanic|panic|fatal)"`)

// expected matches notable lines that are a spec's own doing: the API
// server's echo of each request a webhook denied, which the specs of bad
// input send.
var expected = regexp.MustCompile(`\] rejected by webhook "`)

// ClusterLogs marks where a local cluster's component logs end, so that a
// failed spec can report what the control plane said while it ran.
type ClusterLogs struct {
	dir     string
	offsets map[string]int64
}

// MarkClusterLogs marks the current ends of the component logs in the
// local cluster's directory (the one holding its kubeconfig).
func MarkClusterLogs(clusterDir string) *ClusterLogs {
	l := &ClusterLogs{dir: filepath.Join(clusterDir, "logs"), offsets: map[string]int64{}}
	for _, c := range componentLogs {
		if fi, err := os.Stat(l.path(c)); err == nil {
			l.offsets[c] = fi.Size()
		}
	}
	return l
}

func (l *ClusterLogs) path(component string) string {
	return filepath.Join(l.dir, component+".log")
}

// Notable returns, per component, the warnings, errors and slow-request
// traces it logged since the mark, the last reportedLines of them. A
// component that logged none is left out.
func (l *ClusterLogs) Notable() map[string]string {
	out := map[string]string{}
	for _, c := range componentLogs {
		lines, err := l.notableLines(c)
		switch {
		case err != nil:
			out[c] = err.Error()
		case len(lines) > 0:
			out[c] = strings.Join(lines, "\n")
		}
	}
	return out
}

// Report adds to the running spec's report, component by component in
// componentLogs' order, what Notable finds.
func (l *ClusterLogs) Report() {
	notable := l.Notable()
	for _, c := range componentLogs {
		if lines, ok := notable[c]; ok {
			ginkgo.AddReportEntry(c+": warnings, errors and slow requests during the spec", lines)
		}
	}
}

func (l *ClusterLogs) notableLines(component string) ([]string, error) {
	f, err := os.Open(l.path(component))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s's log: %w", component, err)
	}
	defer f.Close()
	// A log that shrank was started again: read it whole.
	if fi, err := f.Stat(); err == nil && fi.Size() >= l.offsets[component] {
		if _, err := f.Seek(l.offsets[component], io.SeekStart); err != nil {
			return nil, fmt.Errorf("reading %s's log: %w", component, err)
		}
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if notable.MatchString(sc.Text()) && !expected.MatchString(sc.Text()) {
			lines = append(lines, sc.Text())
			if len(lines) > 2*reportedLines {
				lines = slices.Delete(lines, 0, len(lines)-reportedLines)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s's log: %w", component, err)
	}
	if len(lines) > reportedLines {
		lines = lines[len(lines)-reportedLines:]
	}
	return lines, nil
}
