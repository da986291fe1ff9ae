package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// measurePaired measures two contenders on one round side by side: both
// stand ready on their own control planes at once, and each batch of n
// TrainJobs is created in chunks of o.chunk, the contenders taking turns
// chunk by chunk (A B, B A, A B, ...). A drift of the machine's speed
// then falls on both alike, where in whole batches one after the other it
// falls on whichever ran in the slower minutes. Each contender's time is
// the sum of its chunks', each from its first create to the last object
// seen; its CPU and writes are counted over its own chunks only.
func measurePaired(ctx context.Context, o options, bins binaries, crds crdSources, cs []contender, n, run int) []*result {
	rs := make([]*result, len(cs))
	for i, c := range cs {
		rs[i] = &result{Contender: c, N: n, Run: run, Load: loadAverage()}
	}
	fail := func(err error) []*result {
		for _, r := range rs {
			r.Err = err.Error()
		}
		return rs
	}
	stands := make([]*stand, len(cs))
	trackers := make([]*tracker, len(cs))
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, c := range cs {
		st, err := setUp(ctx, o, bins, crds, c, n, run)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", c.Name, err))
		}
		defer st.stop()
		stands[i] = st
		trackers[i] = newTracker(nsBench, n, c.makesConfigMap())
		if err := trackers[i].start(tctx, st.mc); err != nil {
			return fail(err)
		}
	}
	// A contender's proxy sees its writes alone, and between its chunks
	// it writes nothing but lease renewals: its writes are counted from
	// before its first chunk to after its last.
	before := make([]counts, len(cs))
	for i, st := range stands {
		before[i] = st.proxy.snapshot()
	}
	logf("N=%d run %d: %s side by side, chunks of %d TrainJobs in turn", n, run, cs[0].Name+" and "+cs[1].Name, o.chunk)
	for k := 0; k*o.chunk < n; k++ {
		names := make([]string, 0, o.chunk)
		for i := k * o.chunk; i < min(n, (k+1)*o.chunk); i++ {
			names = append(names, fmt.Sprintf("mpi-%04d", i))
		}
		order := []int{0, 1}
		if k%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			st, t, r := stands[i], trackers[i], rs[i]
			other := stands[1-i]
			before, reqBefore := cpuOf(st, other), st.proxy.snapshot()
			profiles := chunkProfiles(ctx, o, st, fmt.Sprintf("%s-run%d-chunk%d", r.Contender.Name, run, k+1))
			start, err := st.bench.run(ctx, t, names, o.workers)
			if err != nil {
				return fail(err)
			}
			if err := t.waitFor(ctx, k*o.chunk+len(names), o.timeout); err != nil {
				return fail(fmt.Errorf("%s: %w", r.Contender.Name, err))
			}
			took := t.lastOf(names).Sub(start)
			r.Total += took
			st.proxy.quiet(ctx, quietWindow, time.Minute)
			if err := profiles(); err != nil {
				return fail(err)
			}
			used := cpuOf(st, other).sub(before)
			r.Usage = usageOf(st.ctrl)
			r.CPU += used.ctrl
			r.APICPU += used.api
			reqs := st.proxy.snapshot().sub(reqBefore)
			logf("%s N=%d run %d chunk %d: %d jobs in %.2fs, API-server CPU %.1fs, controller CPU %.1fs, %.2f writes and %.2f reads a job; "+
				"etcd CPU %.1fs; the other's control plane %.1fs, its controller %.1fs; CPUs idle %.1fs and %.1fs (over the chunk and its quiet window)",
				r.Contender.Name, n, run, k+1, len(names), took.Seconds(), used.api, used.ctrl,
				float64(reqs.total(func(w write) bool { return !w.lease() }))/float64(len(names)), float64(reqs.Reads)/float64(len(names)),
				used.etcd, used.otherPlane, used.otherCtrl, used.idle[controlPlaneCPU], used.idle[othersCPU])
		}
	}
	for i, r := range rs {
		r.Writes = stands[i].proxy.snapshot().sub(before[i])
		lat, _ := trackers[i].latencies()
		r.Done = len(lat)
		r.P50, r.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	}
	return rs
}

// chunkProfiles starts CPU profiles of a chunk's API server and, when it
// serves them, its controller, for o.pprofSecs from the chunk's start, if
// -pprof names a directory; the function it returns waits for them. Where
// the API server's time goes in the two contenders' chunks is what tells
// their costs apart.
func chunkProfiles(ctx context.Context, o options, st *stand, name string) func() error {
	if o.pprofDir == "" {
		return func() error { return nil }
	}
	query := fmt.Sprintf("?seconds=%d", o.pprofSecs)
	done := make(chan error, 2)
	n := 1
	go func() {
		done <- st.cp.fetchProfile(ctx, query, filepath.Join(o.pprofDir, "apiserver-"+name+".pprof"))
	}()
	if st.ctrl != nil && st.ctrl.pprof != "" {
		n++
		go func() {
			done <- fetchProfile(ctx, st.ctrl.pprof, "profile", query, filepath.Join(o.pprofDir, "controller-"+name+".pprof"))
		}()
	}
	return func() error {
		var errs []error
		for range n {
			errs = append(errs, <-done)
		}
		return errors.Join(errs...)
	}
}

// chunkCPU is the CPU seconds a chunk's contender and the one waiting its
// turn have taken, and how long each core was idle: a waiting control
// plane should take next to none, and a control plane short of CPU leaves
// its core no idle time.
type chunkCPU struct {
	api, etcd, ctrl       float64
	otherPlane, otherCtrl float64
	idle                  [2]float64 // controlPlaneCPU, othersCPU
}

func cpuOf(st, other *stand) chunkCPU {
	c := chunkCPU{
		api:        usageOfProc(st.cp.api).CPU,
		etcd:       usageOfProc(st.cp.etcd).CPU,
		ctrl:       usageOf(st.ctrl).CPU,
		otherPlane: usageOfProc(other.cp.api).CPU + usageOfProc(other.cp.etcd).CPU,
		otherCtrl:  usageOf(other.ctrl).CPU,
	}
	if stat, err := os.ReadFile("/proc/stat"); err == nil {
		c.idle = idleSeconds(string(stat))
	}
	return c
}

func (c chunkCPU) sub(b chunkCPU) chunkCPU {
	return chunkCPU{
		api: c.api - b.api, etcd: c.etcd - b.etcd, ctrl: c.ctrl - b.ctrl,
		otherPlane: c.otherPlane - b.otherPlane, otherCtrl: c.otherCtrl - b.otherCtrl,
		idle: [2]float64{c.idle[0] - b.idle[0], c.idle[1] - b.idle[1]},
	}
}

// idleSeconds reads from /proc/stat how long CPUs 0 and 1 have been idle
// (its idle and iowait columns); a CPU whose line is missing or malformed
// reads 0.
func idleSeconds(stat string) [2]float64 {
	var idle [2]float64
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		cpu, ok := strings.CutPrefix(f[0], "cpu")
		n, err := strconv.Atoi(cpu)
		if !ok || err != nil || n < 0 || n >= len(idle) {
			continue
		}
		i, err1 := strconv.ParseInt(f[4], 10, 64)
		w, err2 := strconv.ParseInt(f[5], 10, 64)
		if err1 == nil && err2 == nil {
			idle[n] = float64(i+w) / clockTicks
		}
	}
	return idle
}
