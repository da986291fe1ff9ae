package main

import (
	"context"
	"fmt"
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
			ctrlBefore, apiBefore, reqBefore := usageOf(st.ctrl), usageOfProc(st.cp.api), st.proxy.snapshot()
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
			ctrlAfter, apiAfter := usageOf(st.ctrl), usageOfProc(st.cp.api)
			r.Usage = ctrlAfter
			r.CPU += ctrlAfter.CPU - ctrlBefore.CPU
			r.APICPU += apiAfter.CPU - apiBefore.CPU
			reqs := st.proxy.snapshot().sub(reqBefore)
			logf("%s N=%d run %d chunk %d: %d jobs in %.2fs, API-server CPU %.1fs, controller CPU %.1fs, %.2f writes and %.2f reads a job",
				r.Contender.Name, n, run, k+1, len(names), took.Seconds(), apiAfter.CPU-apiBefore.CPU, ctrlAfter.CPU-ctrlBefore.CPU,
				float64(reqs.total(func(w write) bool { return !w.lease() }))/float64(len(names)), float64(reqs.Reads)/float64(len(names)))
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
