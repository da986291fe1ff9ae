package main

import (
	_ "embed"
	"fmt"
	"os"
	goruntime "runtime"
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

func (rep *report) failed() bool {
	for _, r := range rep.results {
		if r.Err != "" {
			return true
		}
	}
	return false
}

func (rep *report) find(name string, n int) *result {
	for _, r := range rep.results {
		if r.Contender.Name == name && r.N == n && r.Err == "" {
			return r
		}
	}
	return nil
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
	p("Written by `hack/bench` (`make bench`)")
	if quick {
		p(" in quick mode")
	}
	p(" on %s. Every figure below is from that one run.\n\n", m.Date)
	p("**Machine:** %s; %s memory; %s; %s. Load average (1, 5, 15 min) %s at the start, %s at the end; ",
		m.CPU, m.Memory, m.Kernel, m.Go, m.LoadStart, m.LoadEnd)
	p("the machine is shared, so each run's load average is listed with it.\n\n")
	p("**Workload:** N MPI TrainJobs of %d workers on the OpenMPI ClusterTrainingRuntime `%s` "+
		"(samples/runtimes), created by %d concurrent goroutines with no client rate limit; each contender alone "+
		"on a fresh etcd and kube-apiserver.\n\n", rep.opts.workers, runtimeName, rep.opts.concurrency)
	if len(rep.opts.torusFlags) > 0 {
		p("**Not Torus's defaults:** every Torus run here had the extra flags `%s`.\n\n", strings.Join(rep.opts.torusFlags, " "))
	}

	p("## Time until every TrainJob has its objects\n\n")
	p("Per job: from the TrainJob's create request until the last of its objects appears in a watch: its JobSet and Secret (SSH keys and hostfile) for Torus; its JobSet, Secret and hostfile ConfigMap for upstream and the floor. Total: from the first create request until the last object.\n\n")
	p("| N | contender | total | jobs/s | per-job p50 | per-job p99 | load avg at start |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Err != "" {
			p("| %d | %s | failed: %s (%d of %d done) | | | | %s |\n", r.N, r.Contender.Label, oneLine(r.Err), r.Done, r.N, r.Load)
			continue
		}
		p("| %d | %s | %s | %.0f | %s | %s | %s |\n", r.N, r.Contender.Label, secs(r.Total),
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
	p("| N | contender | objects | TrainJob | events | refused | other | all |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Err != "" {
			continue
		}
		w := r.Writes
		p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", r.N, r.Contender.Label,
			perJob(w, r.N, isObject), perJob(w, r.N, isStatus), perJob(w, r.N, isEvent), perJob(w, r.N, isFailed),
			perJob(w, r.N, isOther), perJob(w, r.N, func(w write) bool { return !w.lease() }))
	}

	p("\n## Bytes written per job\n\n")
	p("Request bodies the proxy passed to the API server, per job, lease renewals left out: *objects* as above " +
		"(the JobSet, Secret and, for upstream and the floor, hostfile ConfigMap, as each contender encodes them), *all* every write.\n\n")
	p("| N | contender | objects | all writes |\n| --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Err != "" {
			continue
		}
		p("| %d | %s | %s | %s |\n", r.N, r.Contender.Label, kib(r.Writes.bytes(isObject), r.N),
			kib(r.Writes.bytes(func(w write) bool { return !w.lease() }), r.N))
	}

	p("\n## Controller memory and CPU\n\n")
	p("Peak RSS is the controller process's VmHWM (its whole life, warm-up included); CPU seconds (user + system, " +
		"from /proc/<pid>/stat) are those spent during the batch, for the controller and for the API server.\n\n")
	p("| N | contender | peak RSS | controller CPU s | API server CPU s |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Err != "" {
			continue
		}
		cpu := fmt.Sprintf("%.1f", r.CPU)
		if r.Contender.Kind == kindFloor {
			cpu = "–"
		}
		p("| %d | %s | %s | %s | %.1f |\n", r.N, r.Contender.Label, mib(r.Usage.PeakRSS), cpu, r.APICPU)
	}

	p("\n## Writes at rest\n\n")
	p("After the largest batch, with nothing changing: every write request over the window, per minute.\n\n")
	p("| contender | window | all writes/min | lease renewals/min | other writes/min |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Steady == nil {
			continue
		}
		perMin := func(keep func(write) bool) string {
			return fmt.Sprintf("%.1f", float64(r.Steady.total(keep))/r.SteadyWindow.Minutes())
		}
		p("| %s | %s | %s | %s | %s |\n", r.Contender.Label, r.SteadyWindow,
			perMin(func(write) bool { return true }), perMin(write.lease), perMin(func(w write) bool { return !w.lease() }))
	}

	if rep.opts.bigWorkers > 0 {
		p("\n## One TrainJob of %d workers\n\n", rep.opts.bigWorkers)
		p("On the control plane of the smallest N, after its batch.\n\n")
		p("| contender | to its JobSet | to all its objects |\n| --- | --- | --- |\n")
		for _, r := range rep.results {
			if r.Err != "" || r.N != rep.smallest() {
				continue
			}
			if r.BigErr != "" {
				p("| %s | failed: %s | |\n", r.Contender.Label, oneLine(r.BigErr))
				continue
			}
			p("| %s | %s | %s |\n", r.Contender.Label, secs(r.BigJobSet), secs(r.BigAll))
		}
	}

	largest := rep.largest()
	for _, r := range rep.results {
		if r.Err != "" || r.N != largest || (r.Listing == nil && r.ListingErr == "") {
			continue
		}
		p("\n## Listing %d jobs\n\n", largest)
		if r.ListingErr != "" {
			p("Failed: %s\n", oneLine(r.ListingErr))
			continue
		}
		l := r.Listing
		mpi, get := median(l.MPI), median(l.Get)
		p("On %s's control plane after its batch, straight to the API server; the median of %d runs each, alternating.\n\n", r.Contender.Label, len(l.MPI))
		p("| command | rows | first row | all | runs (all) |\n| --- | --- | --- | --- | --- |\n")
		runs := func(ts []listTime) string {
			var parts []string
			for _, t := range ts {
				parts = append(parts, secs(t.Total))
			}
			return strings.Join(parts, ", ")
		}
		p("| `kubectl mpi list -A` | %d | %s | %s | %s |\n", l.MPIRows, secs(mpi.First), secs(mpi.Total), runs(l.MPI))
		p("| `kubectl get trainjobs -A` | %d | %s | %s | %s |\n", l.GetRows, secs(get.First), secs(get.Total), runs(l.Get))
	}
	p("\n## Every write at N=%d, per job\n\n", largest)
	p("| contender | user agent | verb | resource | refused | per job |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rep.results {
		if r.Err != "" || r.N != largest {
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
	for _, n := range rep.opts.sizes {
		t, u, f := rep.find("torus", n), rep.find("upstream", n), rep.find("floor", n)
		if t != nil && u != nil {
			out = append(out, fmt.Sprintf("torus/upstream throughput ratio at N=%d: %.2f", n, u.Total.Seconds()/t.Total.Seconds()))
		}
		if t != nil && f != nil {
			out = append(out, fmt.Sprintf("torus time / floor time at N=%d: %.2f", n, t.Total.Seconds()/f.Total.Seconds()))
		}
		if uq := rep.find("upstream-qps500", n); t != nil && uq != nil {
			out = append(out, fmt.Sprintf("torus/upstream throughput ratio at N=%d, both at QPS 500/1000: %.2f", n, uq.Total.Seconds()/t.Total.Seconds()))
		}
		if tq := rep.find("torus-qps50", n); tq != nil && u != nil {
			out = append(out, fmt.Sprintf("torus/upstream throughput ratio at N=%d, both at QPS 50/100: %.2f", n, u.Total.Seconds()/tq.Total.Seconds()))
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

// goals checks the figures against issue 8's goals, at the largest N.
func (rep *report) goals(p func(string, ...any)) {
	n := rep.largest()
	t, u, f := rep.find("torus", n), rep.find("upstream", n), rep.find("floor", n)
	if t == nil {
		return
	}
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	p("\n## Goals (issue 8), at N=%d\n\n| goal | measured | met |\n| --- | --- | --- |\n", n)
	if u != nil {
		r := u.Total.Seconds() / t.Total.Seconds()
		note := ""
		if f != nil {
			// Upstream at its defaults is bound by its client rate limit,
			// the floor and Torus by the API server's CPU: on a slow run
			// the floor itself may not reach 3× upstream.
			note = fmt.Sprintf("; the floor itself: %.2f×", u.Total.Seconds()/f.Total.Seconds())
		}
		p("| throughput at least 3× upstream's, both at their defaults | %.2f× (%s against %s%s) | %s |\n", r, secs(t.Total), secs(u.Total), note, met(r >= 3))
	}
	if f != nil {
		r := t.Total.Seconds() / f.Total.Seconds()
		p("| time within 1.5× the floor measured in the same run | %.2f× (%s against %s) | %s |\n", r, secs(t.Total), secs(f.Total), met(r <= 1.5))
	}
	objects := float64(t.Writes.total(isObject)) / float64(n)
	refused := float64(t.Writes.total(isFailed)) / float64(n)
	p("| 2 writes per job to create its objects (issue 19; 3 before), no repeated applies | %.2f object writes and %.3f refused writes per job | %s |\n",
		objects, refused, met(objects <= 2.0005 && t.Writes.total(func(w write) bool { return w.Verb == "apply" }) == 0))
	if t.Steady != nil {
		other := float64(t.Steady.total(func(w write) bool { return !w.lease() })) / t.SteadyWindow.Minutes()
		p("| no writes at rest apart from leader election | %.1f other writes per minute | %s |\n", other, met(other == 0))
	}
	if u != nil {
		p("| peak RSS no more than upstream's | %s against %s | %s |\n", mib(t.Usage.PeakRSS), mib(u.Usage.PeakRSS), met(t.Usage.PeakRSS <= u.Usage.PeakRSS))
	}
}
