package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"time"
)

// notes is the hand-written part of results.md: method, settings and what
// the profiles showed. It is kept with the program so that a new run keeps
// it.
//
//go:embed notes.md
var notes string

type machine struct {
	CPU, Memory, Kernel, Go string
	Date                    string
	LoadStart, LoadEnd      string
}

func describeMachine() machine {
	m := machine{Go: goruntime.Version(), Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), LoadStart: loadAverage()}
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	m.CPU = fmt.Sprintf("%d × %s", goruntime.NumCPU(), model)
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
				m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(data))
	}
	return m
}

// loadAverage is the 1, 5 and 15 minute load averages.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func mib(b int64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

type report struct {
	machine machine
	opts    options
	results []*result
}

// finish notes the load average at the end and renders the report.
func (rep *report) finish(quick bool) string {
	rep.machine.LoadEnd = loadAverage()
	return rep.markdown(quick)
}

// write renders the report into path; partial marks one still running.
func (rep *report) write(path string, quick, partial bool) error {
	text := rep.finish(quick)
	if partial {
		text = "**Partial: this invocation is still running; the figures so far.**\n\n" + text
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func (rep *report) failed() bool {
	for _, r := range rep.results {
		if r.Err != "" {
			return true
		}
	}
	return false
}

// runsOf are the successful runs of a contender at one N, in run order.
func (rep *report) runsOf(name string, n int) []*result {
	var out []*result
	for _, r := range rep.results {
		if r.Contender.Name == name && r.N == n && r.Err == "" {
			out = append(out, r)
		}
	}
	return out
}

// find is a contender's first successful run at one N.
func (rep *report) find(name string, n int) *result {
	if rs := rep.runsOf(name, n); len(rs) > 0 {
		return rs[0]
	}
	return nil
}

// ratios pairs two contenders' runs of the same round at one N and gives
// f of each pair, in run order.
func (rep *report) ratios(a, b string, n int, f func(a, b *result) float64) []float64 {
	var out []float64
	for _, x := range rep.runsOf(a, n) {
		for _, y := range rep.runsOf(b, n) {
			if x.Run == y.Run {
				out = append(out, f(x, y))
			}
		}
	}
	return out
}

func medianFloat(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is the median of xs and, with more than one run, every run's
// value: "2.51 (median of 3 runs: 2.40, 2.51, 2.63)".
func spread(xs []float64) string { return spreadUnit(xs, "") }

// spreadUnit is spread with a unit after each figure ("×").
func spreadUnit(xs []float64, unit string) string {
	m := fmt.Sprintf("%.2f%s", medianFloat(xs), unit)
	if len(xs) < 2 {
		return m
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f%s", x, unit)
	}
	return fmt.Sprintf("%s (median of %d runs: %s)", m, len(xs), strings.Join(parts, ", "))
}

// key is a result's first cells, N and, with several runs, the run; head
// is the header row and its rule for the given further columns.
func (rep *report) key(r *result) string {
	if rep.opts.runs > 1 {
		return fmt.Sprintf("%d | %d", r.N, r.Run)
	}
	return fmt.Sprint(r.N)
}

func (rep *report) head(cols ...string) string {
	if rep.opts.runs > 1 {
		cols = append([]string{"N", "run"}, cols...)
	} else {
		cols = append([]string{"N"}, cols...)
	}
	rule := strings.Repeat("| --- ", len(cols)) + "|\n"
	return "| " + strings.Join(cols, " | ") + " |\n" + rule
}

// Write categories: what a job's objects cost, what its status costs, the
// events, and requests the API server refused (such as creates of objects
// that already exist).
func isObject(w write) bool {
	switch w.Resource {
	case "jobset.x-k8s.io/jobsets", "secrets", "configmaps":
		return !w.Failed && w.Subresource == ""
	}
	return false
}
func isStatus(w write) bool { return !w.Failed && w.Resource == "trainer.kubeflow.org/trainjobs" }
func isEvent(w write) bool  { return !w.Failed && w.event() }
func isFailed(w write) bool { return w.Failed && !w.lease() }
func isOther(w write) bool {
	return !w.lease() && !isObject(w) && !isStatus(w) && !isEvent(w) && !isFailed(w)
}

// kib is bytes per job in KiB.
func kib(b int64, n int) string {
	return fmt.Sprintf("%.1f KiB", float64(b)/1024/float64(n))
}

func perJob(c counts, n int, keep func(write) bool) string {
	return fmt.Sprintf("%.2f", float64(c.total(keep))/float64(n))
}

func (rep *report) markdown(quick bool) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := rep.machine
	p("# Torus and upstream Trainer side by side: throughput, API writes, memory\n\n")
	p("Written by `test/perf/controlplane` (`make bench`)")
	if quick {
		p(" in quick mode")
	}
	p(". Every figure below is from that one invocation")
	switch {
	case rep.opts.chunk > 0:
		p(": %d runs of the two contenders at each N, side by side on their own control planes, taking turns creating chunks of %d TrainJobs (each chunk in the other order than the last, every other run starting with the other); a contender's time is the sum of its chunks'", rep.opts.runs, rep.opts.chunk)
	case rep.opts.runs > 1:
		p(": %d runs of each contender at each N, the contenders of a run one after the other, every other run in reverse order", rep.opts.runs)
	}
	p(".\n\n")
	p("**Invocation:** `go run ./test/perf/controlplane %s`.\n\n", strings.Join(os.Args[1:], " "))
	p("**Machine:** %s; %s memory; %s; %s. Load average (1, 5, 15 min) %s at the start, %s at the end; ",
		m.CPU, m.Memory, m.Kernel, m.Go, m.LoadStart, m.LoadEnd)
	p("the machine is shared, so each run's load average is listed with it.\n\n")
	p("**Workload:** N MPI TrainJobs of %d workers on the OpenMPI ClusterTrainingRuntime `%s` "+
		"(samples/runtimes), created by %d concurrent goroutines with no client rate limit; each contender on a fresh "+
		"etcd and kube-apiserver of its own.\n\n", rep.opts.workers, runtimeName, rep.opts.concurrency)
	if rep.opts.placement.split {
		p("**Cores split:** etcd and kube-apiserver ran on CPU %d; the controller and the benchmark (its creators and counting proxy) on CPU %d.\n\n", controlPlaneCPU, othersCPU)
	}
	if len(rep.opts.torusFlags) > 0 {
		p("**Not Torus's defaults:** every Torus run here had the extra flags `%s`.\n\n", strings.Join(rep.opts.torusFlags, " "))
	}

	p("## Time until every TrainJob has its objects\n\n")
	p("Per job: from the TrainJob's create request until the last of its objects appears in a watch: its JobSet and Secret (SSH keys and hostfile) for Torus; its JobSet, Secret and hostfile ConfigMap for upstream and the floor. Total: from the first create request until the last object.\n\n")
	p("%s", rep.head("contender", "total", "jobs/s", "per-job p50", "per-job p99", "load avg at start"))
	for _, r := range rep.results {
		if r.Err != "" {
			p("| %s | %s | failed: %s (%d of %d done) | | | | %s |\n", rep.key(r), r.Contender.Label, oneLine(r.Err), r.Done, r.N, r.Load)
			continue
		}
		p("| %s | %s | %s | %.0f | %s | %s | %s |\n", rep.key(r), r.Contender.Label, secs(r.Total),
			float64(r.N)/r.Total.Seconds(), secs(r.P50), secs(r.P99), r.Load)
	}

	rep.goals(p)

	p("\n## Throughput ratios\n\n```\n")
	for _, line := range rep.ratioLines() {
		p("%s\n", line)
	}
	p("```\n\n")

	p("## API write requests per job\n\n")
	p("Counted by a proxy in front of the API server, from the first create until the contender sent nothing "+
		"but lease renewals for %s; lease renewals are left out (they are per minute, below). "+
		"*objects*: successful writes of the JobSet, Secret and (upstream, floor) hostfile ConfigMap; *TrainJob*: status (and any other) writes "+
		"to the TrainJob; *events*: Event creates; *refused*: writes the API server answered with an error "+
		"(e.g. 409 for a create of an object that exists).\n\n", quietWindow)
	p("%s", rep.head("contender", "objects", "TrainJob", "events", "refused", "other", "all"))
	for _, r := range rep.results {
		if r.Err != "" {
			continue
		}
		w := r.Writes
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", rep.key(r), r.Contender.Label,
			perJob(w, r.N, isObject), perJob(w, r.N, isStatus), perJob(w, r.N, isEvent), perJob(w, r.N, isFailed),
			perJob(w, r.N, isOther), perJob(w, r.N, func(w write) bool { return !w.lease() }))
	}

	p("\n## Bytes written per job\n\n")
	p("Request bodies the proxy passed to the API server, per job, lease renewals left out: *objects* as above " +
		"(the JobSet, Secret and, for upstream and the floor, hostfile ConfigMap, as each contender encodes them), *all* every write.\n\n")
	p("%s", rep.head("contender", "objects", "all writes"))
	for _, r := range rep.results {
		if r.Err != "" {
			continue
		}
		p("| %s | %s | %s | %s |\n", rep.key(r), r.Contender.Label, kib(r.Writes.bytes(isObject), r.N),
			kib(r.Writes.bytes(func(w write) bool { return !w.lease() }), r.N))
	}

	p("\n## Controller memory and CPU\n\n")
	p("Peak RSS is the controller process's VmHWM (its whole life, warm-up included); CPU seconds (user + system, " +
		"from /proc/<pid>/stat) are those spent during the batch, for the controller and for the API server.\n\n")
	p("%s", rep.head("contender", "peak RSS", "controller CPU s", "API server CPU s", "API server CPU ms per job"))
	for _, r := range rep.results {
		if r.Err != "" {
			continue
		}
		cpu := fmt.Sprintf("%.1f", r.CPU)
		if r.Contender.Kind == kindFloor {
			cpu = "–"
		}
		p("| %s | %s | %s | %s | %.1f | %.2f |\n", rep.key(r), r.Contender.Label, mib(r.Usage.PeakRSS), cpu, r.APICPU, 1000*r.APICPU/float64(r.N))
	}
	if lines := rep.rssGrowth(); len(lines) > 0 {
		p("\nPeak RSS growth per 1,000 jobs (medians of the runs), from one N to the next:\n\n")
		p("| contender | from N | to N | peak RSS | growth per 1,000 jobs |\n| --- | --- | --- | --- | --- |\n")
		for _, l := range lines {
			p("%s\n", l)
		}
	}

	p("\n## Writes at rest\n\n")
	p("After the largest batch, with nothing changing: every write request over the window, per minute.\n\n")
	p("| contender | run | window | all writes/min | lease renewals/min | other writes/min |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Steady == nil {
			continue
		}
		perMin := func(keep func(write) bool) string {
			return fmt.Sprintf("%.1f", float64(r.Steady.total(keep))/r.SteadyWindow.Minutes())
		}
		p("| %s | %d | %s | %s | %s | %s |\n", r.Contender.Label, r.Run, r.SteadyWindow,
			perMin(func(write) bool { return true }), perMin(write.lease), perMin(func(w write) bool { return !w.lease() }))
	}

	if rep.opts.bigWorkers > 0 {
		p("\n## One TrainJob of %d workers\n\n", rep.opts.bigWorkers)
		p("On the control plane of the smallest N, after its batch.\n\n")
		p("| contender | run | to its JobSet | to all its objects |\n| --- | --- | --- | --- |\n")
		for _, r := range rep.results {
			if r.Err != "" || r.N != rep.smallest() {
				continue
			}
			if r.BigErr != "" {
				p("| %s | %d | failed: %s | |\n", r.Contender.Label, r.Run, oneLine(r.BigErr))
				continue
			}
			p("| %s | %d | %s | %s |\n", r.Contender.Label, r.Run, secs(r.BigJobSet), secs(r.BigAll))
		}
	}

	largest := rep.largest()
	rep.pluginAtScale(p, largest)
	p("\n## Every write at N=%d, per job (run 1)\n\n", largest)
	p("| contender | user agent | verb | resource | refused | per job |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Err != "" || r.N != largest || r.Run != 1 {
			continue
		}
		for _, w := range r.Writes.sorted() {
			if w.lease() {
				continue
			}
			res := w.Resource
			if w.Subresource != "" {
				res += "/" + w.Subresource
			}
			refused := ""
			if w.Failed {
				refused = "yes"
			}
			p("| %s | `%s` | %s | %s | %s | %.3f |\n", r.Contender.Label, w.Agent, w.Verb, res, refused, float64(r.Writes.Writes[w])/float64(r.N))
		}
	}
	p("\n%s", notes)
	return b.String()
}

// ratioLines compare each contender at its defaults, and Torus with the
// floor measured in the same run.
func (rep *report) ratioLines() []string {
	var out []string
	add := func(format string, xs []float64, n int) {
		if len(xs) > 0 {
			out = append(out, fmt.Sprintf(format, n)+": "+spread(xs))
		}
	}
	throughput := func(t, u *result) float64 { return u.Total.Seconds() / t.Total.Seconds() }
	for _, n := range rep.opts.sizes {
		add("torus/upstream throughput ratio at N=%d", rep.ratios("torus", "upstream", n, throughput), n)
		add("torus time / floor time at N=%d", rep.ratios("torus", "floor", n, func(t, f *result) float64 {
			return t.Total.Seconds() / f.Total.Seconds()
		}), n)
		add("torus/upstream throughput ratio at N=%d, both at QPS 500/1000", rep.ratios("torus", "upstream-qps500", n, throughput), n)
		add("torus/upstream throughput ratio at N=%d, both at QPS 50/100", rep.ratios("torus-qps50", "upstream", n, throughput), n)
		add("torus/floor API-server CPU per job at N=%d", rep.ratios("torus", "floor", n, func(t, f *result) float64 {
			return t.APICPU / f.APICPU
		}), n)
		add("two-object floor/floor API-server CPU per job at N=%d", rep.ratios("floor2", "floor", n, func(f2, f *result) float64 {
			return f2.APICPU / f.APICPU
		}), n)
		add("torus/two-object floor API-server CPU per job at N=%d", rep.ratios("torus", "floor2", n, func(t, f2 *result) float64 {
			return t.APICPU / f2.APICPU
		}), n)
		add("torus/upstream API-server CPU per job at N=%d", rep.ratios("torus", "upstream", n, func(t, u *result) float64 {
			return t.APICPU / u.APICPU
		}), n)
		add("torus/upstream peak RSS at N=%d", rep.ratios("torus", "upstream", n, func(t, u *result) float64 {
			return float64(t.Usage.PeakRSS) / float64(u.Usage.PeakRSS)
		}), n)
	}
	return out
}

// medianOf is the median of f over a contender's runs at one N, and
// whether it ran.
func (rep *report) medianOf(name string, n int, f func(*result) float64) (float64, bool) {
	rs := rep.runsOf(name, n)
	if len(rs) == 0 {
		return 0, false
	}
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return medianFloat(xs), true
}

// rssGrowth gives, for Torus and upstream at their defaults, the peak RSS
// at each N and its growth per 1,000 jobs since the N before: how memory
// grows with the cluster.
func (rep *report) rssGrowth() []string {
	var out []string
	rss := func(r *result) float64 { return float64(r.Usage.PeakRSS) }
	for _, name := range []string{"torus", "upstream"} {
		prevN, prev := 0, 0.0
		for _, n := range rep.opts.sizes {
			v, ok := rep.medianOf(name, n, rss)
			if !ok {
				continue
			}
			label := rep.runsOf(name, n)[0].Contender.Label
			if prevN == 0 {
				out = append(out, fmt.Sprintf("| %s | – | %d | %s | – |", label, n, mib(int64(v))))
			} else {
				per := (v - prev) / (float64(n-prevN) / 1000)
				out = append(out, fmt.Sprintf("| %s | %d | %d | %s | %.1f MiB |", label, prevN, n, mib(int64(v)), per/(1<<20)))
			}
			prevN, prev = n, v
		}
	}
	return out
}

func (rep *report) largest() int {
	l := 0
	for _, n := range rep.opts.sizes {
		l = max(l, n)
	}
	return l
}

func (rep *report) smallest() int {
	s := rep.largest()
	for _, n := range rep.opts.sizes {
		s = min(s, n)
	}
	return s
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// goals checks the figures against Torus's performance goals at the
// largest N, on the medians of the runs.
func (rep *report) goals(p func(string, ...any)) {
	n := rep.largest()
	t := rep.find("torus", n)
	if t == nil {
		return
	}
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	p("\n## Goals at N=%d\n\n", n)
	switch {
	case rep.opts.chunk > 0:
		p("Each ratio is the median of the runs' ratios, each run's contenders measured side by side in chunks of %d jobs taken in turn.\n\n", rep.opts.chunk)
	case rep.opts.runs > 1:
		p("Each ratio is the median of the runs' ratios, each run's contenders measured one after the other (every other run in reverse order).\n\n")
	}
	p("| goal | measured | met |\n| --- | --- | --- |\n")
	if xs := rep.ratios("torus", "upstream", n, func(t, u *result) float64 { return u.Total.Seconds() / t.Total.Seconds() }); len(xs) > 0 {
		want := 3.0
		if n >= 10000 {
			want = 4.0
		}
		floor := ""
		if fs := rep.ratios("floor", "upstream", n, func(f, u *result) float64 { return u.Total.Seconds() / f.Total.Seconds() }); len(fs) > 0 {
			// Upstream at its defaults is bound by its client rate limit,
			// the floor and Torus by the API server's CPU: on a slow run
			// the floor itself may not reach the goal.
			floor = fmt.Sprintf("; the floor itself: %.2f×", medianFloat(fs))
		}
		if fs := rep.ratios("floor2", "upstream", n, func(f2, u *result) float64 { return u.Total.Seconds() / f2.Total.Seconds() }); len(fs) > 0 {
			floor += fmt.Sprintf(", the two-object floor: %.2f×", medianFloat(fs))
		}
		m := medianFloat(xs)
		p("| throughput at least %.0f× upstream's, both at their defaults | %s%s | %s |\n", want, spreadUnit(xs, "×"), floor, met(m >= want))
	}
	if xs := rep.ratios("torus", "floor", n, func(t, f *result) float64 { return t.Total.Seconds() / f.Total.Seconds() }); len(xs) > 0 {
		p("| time within 1.5× the floor's | %s | %s |\n", spreadUnit(xs, "×"), met(medianFloat(xs) <= 1.5))
	}
	if xs := rep.ratios("torus", "floor", n, func(t, f *result) float64 { return t.APICPU / f.APICPU }); len(xs) > 0 {
		floor2 := ""
		if fs := rep.ratios("floor2", "floor", n, func(f2, f *result) float64 { return f2.APICPU / f.APICPU }); len(fs) > 0 {
			// What the two objects cost with no controller at all: no
			// controller making them can go below it.
			floor2 = fmt.Sprintf("; the two-object floor itself: %.2f×", medianFloat(fs))
		}
		p("| API-server CPU per job at most 0.75× the three-object floor's | %s%s | %s |\n", spreadUnit(xs, "×"), floor2, met(medianFloat(xs) <= 0.75))
	}
	// The two-object floor bounds what any controller that makes Torus's
	// objects can reach; where the goals above lie beyond the floors
	// themselves, these rows say how far Torus is from what is possible.
	if xs := rep.ratios("torus", "floor2", n, func(t, f2 *result) float64 { return f2.Total.Seconds() / t.Total.Seconds() }); len(xs) > 0 {
		p("| throughput against the two-object floor's, the most any controller making these objects can reach (for reference) | %s | – |\n", spreadUnit(xs, "×"))
	}
	if xs := rep.ratios("torus", "floor2", n, func(t, f2 *result) float64 { return t.APICPU / f2.APICPU }); len(xs) > 0 {
		p("| API-server CPU per job against the two-object floor's, the least any controller making these objects can cost (for reference) | %s | – |\n", spreadUnit(xs, "×"))
	}
	objects := float64(t.Writes.total(isObject)) / float64(n)
	refused := float64(t.Writes.total(isFailed)) / float64(n)
	p("| 2 writes per job to create its objects, no repeated applies | %.2f object writes and %.3f refused writes per job (run 1) | %s |\n",
		objects, refused, met(objects <= 2.0005 && t.Writes.total(func(w write) bool { return w.Verb == "apply" }) == 0))
	if t.Steady != nil {
		other := float64(t.Steady.total(func(w write) bool { return !w.lease() })) / t.SteadyWindow.Minutes()
		p("| no writes at rest apart from leader election | %.1f other writes per minute (run 1) | %s |\n", other, met(other == 0))
	}
	if xs := rep.ratios("torus", "upstream", n, func(t, u *result) float64 { return float64(t.Usage.PeakRSS) / float64(u.Usage.PeakRSS) }); len(xs) > 0 {
		p("| peak RSS at most 0.6× upstream's | %s | %s |\n", spreadUnit(xs, "×"), met(medianFloat(xs) <= 0.6))
	}
}

// pluginAtScale reports the plugin's commands on Torus's control plane
// after its largest batch: listing every job, and describe and wait on one.
func (rep *report) pluginAtScale(p func(string, ...any), largest int) {
	var rs []*result
	for _, r := range rep.results {
		if r.Err == "" && r.N == largest && (r.Listing != nil || r.ListingErr != "" || r.Jobs != nil || r.JobsErr != "") {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	p("\n## The plugin with %d jobs in the cluster\n\n", largest)
	p("On %s's control plane after its batch (%d TrainJobs, the batch's and the warm-up job, with their JobSets and Secrets), straight to the API server; each command %d times, alternating with the one it is compared with, and the median.\n\n",
		rs[0].Contender.Label, largest+1, listRuns)
	p("| run | command | rows | first row | all | runs (all) |\n| --- | --- | --- | --- | --- | --- |\n")
	durations := func(ds []time.Duration) string {
		parts := make([]string, len(ds))
		for i, d := range ds {
			parts[i] = secs(d)
		}
		return strings.Join(parts, ", ")
	}
	for _, r := range rs {
		if r.ListingErr != "" {
			p("| %d | listing | failed: %s | | | |\n", r.Run, oneLine(r.ListingErr))
		} else if l := r.Listing; l != nil {
			totals := func(ts []listTime) []time.Duration {
				out := make([]time.Duration, len(ts))
				for i, t := range ts {
					out[i] = t.Total
				}
				return out
			}
			mpi, get := median(l.MPI), median(l.Get)
			p("| %d | `kubectl mpi list -A` | %d | %s | %s | %s |\n", r.Run, l.MPIRows, secs(mpi.First), secs(mpi.Total), durations(totals(l.MPI)))
			p("| %d | `kubectl get trainjobs -A` | %d | %s | %s | %s |\n", r.Run, l.GetRows, secs(get.First), secs(get.Total), durations(totals(l.Get)))
		}
		if r.JobsErr != "" {
			p("| %d | describe and wait | failed: %s | | | |\n", r.Run, oneLine(r.JobsErr))
		} else if j := r.Jobs; j != nil {
			for _, c := range j.Commands {
				p("| %d | %s %s | | | %s | %s |\n", r.Run, c.Label, j.Job, secs(middle(c.Runs)), durations(c.Runs))
			}
		}
	}
	p("\nFor describe and wait, the job's JobSet is given the status its controller writes when the launcher succeeds, and Torus reports the TrainJob Complete, before the clock starts.\n")
}
