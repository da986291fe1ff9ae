package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// run starts a component through the supervisor (ports outside the
// ephemeral range, ready and listening before it counts, restarted on
// other ports when a bind fails), records its ports, and returns them.
func (c *cluster) run(ctx context.Context, comp supervisor.Component) (*supervisor.Process, []int, error) {
	p, ports, err := c.sup.Run(ctx, comp)
	if err != nil {
		return nil, nil, err
	}
	c.ports[comp.Name] = ports
	c.logf("started %-24s pid %-7d ports %v", comp.Name, p.PID(), ports)
	return p, ports, c.writePorts()
}

// running lists the components whose PID file names a live process.
func (c *cluster) running() map[string]int {
	out := map[string]int{}
	for name, r := range c.pids() {
		if r.Alive() {
			out[name] = r.PID
		}
	}
	return out
}

// pids reads every PID file, of live and dead components alike.
func (c *cluster) pids() map[string]supervisor.PIDRecord {
	out := map[string]supervisor.PIDRecord{}
	files, _ := filepath.Glob(filepath.Join(c.dir, "pids", "*.pid"))
	for _, f := range files {
		if r, err := supervisor.ReadPIDFile(f); err == nil {
			out[strings.TrimSuffix(filepath.Base(f), ".pid")] = r
		}
	}
	return out
}

// stopAll stops components in the reverse of startOrder, each by its PID.
func (c *cluster) stopAll() {
	pids := c.pids()
	var order []string
	for i := len(startOrder) - 1; i >= 0; i-- {
		name := startOrder[i]
		order = append(order, name)
		// Each real node's, as containerd-0, kubelet-1.
		var perNode []string
		for n := range pids {
			if strings.HasPrefix(n, name+"-") {
				perNode = append(perNode, n)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(perNode)))
		order = append(order, perNode...)
	}
	for _, name := range order {
		r, ok := pids[name]
		if !ok {
			continue
		}
		delete(pids, name)
		c.stop(name, r)
	}
	for name, r := range pids {
		c.stop(name, r)
	}
}

// stop stops a component's process group by its PID, if that PID is
// still the component's, and forgets it.
func (c *cluster) stop(name string, r supervisor.PIDRecord) {
	if r.Alive() {
		supervisor.StopPID(r.PID)
		c.logf("stopped %-24s pid %d", name, r.PID)
	}
	_ = os.Remove(filepath.Join(c.dir, "pids", name+".pid"))
}

// waitFor polls check until it succeeds or the timeout passes, failing at
// once, with the end of its log, when the component it depends on dies.
func (c *cluster) waitFor(ctx context.Context, name string, timeout time.Duration, check func(context.Context) error) error {
	return supervisor.Poll(ctx, timeout, func(ctx context.Context) error {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if r, ok := c.pids()[name]; ok && !r.Alive() {
			return supervisor.Fatal(fmt.Errorf("%s exited; last lines of %s:\n%s", name, c.logFile(name), supervisor.Tail(c.logFile(name), 15)))
		}
		return err
	})
}

func (c *cluster) logFile(name string) string { return filepath.Join(c.dir, "logs", name+".log") }
