// Package supervisor runs the processes of Torus's local control planes —
// the local cluster (test/localcluster), the benchmark (test/perf/controlplane) and the OLM
// suite (test/olm) — in one way: ports that cannot collide with the
// kernel's ephemeral ports, each process in a process group of its own
// stopped by PID, a component counted as started only when it passes its
// own readiness check and listens on every port it was given, and a
// restart on other ports when a bind still fails.
package supervisor

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// rangeSize is how many ports a Ports hands out from: enough for several
// local clusters at once, small enough to fit below the usual ephemeral
// range (32768-60999 on Linux).
const rangeSize = 8000

// Ports hands out TCP ports on 127.0.0.1 for processes started later.
//
// A port found by listening on :0 and closing the listener comes from the
// kernel's ephemeral range, the pool every outgoing connection and every
// other listen(:0) draws from, so it can be taken before its owner binds
// it. Ports hands out only ports outside net.ipv4.ip_local_port_range,
// which the kernel never assigns by itself, checks that each is free now,
// and never hands out the same port twice. A port another program binds
// explicitly in between is still possible: Supervisor.Run restarts a
// component that fails to bind on other ports.
type Ports struct {
	mu       sync.Mutex
	lo, hi   int // the range, [lo, hi)
	next     int
	given    map[int]bool
	listenIP string
}

// NewPorts returns ports from a range just outside the kernel's ephemeral
// range, starting at a random offset so that two control planes started at
// once rarely try the same ports.
func NewPorts() (*Ports, error) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's ephemeral port range: %w", err)
	}
	lo, hi, err := nonEphemeralRange(string(data))
	if err != nil {
		return nil, err
	}
	return NewPortsInRange(lo, hi), nil
}

// nonEphemeralRange picks [lo, hi) beside the ephemeral range that
// ip_local_port_range describes ("32768\t60999").
func nonEphemeralRange(ipLocalPortRange string) (lo, hi int, err error) {
	f := strings.Fields(ipLocalPortRange)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("unexpected ip_local_port_range %q", ipLocalPortRange)
	}
	eLo, err1 := strconv.Atoi(f[0])
	eHi, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("parsing ip_local_port_range %q: %w", ipLocalPortRange, err)
	}
	switch {
	case eLo-rangeSize >= 1024:
		return eLo - rangeSize, eLo, nil
	case 65536-(eHi+1) >= rangeSize:
		return eHi + 1, eHi + 1 + rangeSize, nil
	}
	return 0, 0, fmt.Errorf("no %d ports outside the ephemeral range %d-%d (net.ipv4.ip_local_port_range): narrow it, e.g. sysctl -w net.ipv4.ip_local_port_range=\"32768 60999\"", rangeSize, eLo, eHi)
}

// NewPortsInRange hands out ports from [lo, hi) only.
func NewPortsInRange(lo, hi int) *Ports {
	return &Ports{lo: lo, hi: hi, next: lo + rand.IntN(hi-lo), given: map[int]bool{}, listenIP: "127.0.0.1"}
}

// Range is the [lo, hi) range the ports come from.
func (p *Ports) Range() (lo, hi int) { return p.lo, p.hi }

// Take returns a port of the range that is free on 127.0.0.1 now and was
// not handed out by p before.
func (p *Ports) Take() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.hi - p.lo {
		port := p.next
		p.next++
		if p.next == p.hi {
			p.next = p.lo
		}
		if p.given[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(p.listenIP, strconv.Itoa(port)))
		if err != nil {
			continue // in use by someone else
		}
		_ = l.Close()
		p.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port left in %d-%d on %s", p.lo, p.hi-1, p.listenIP)
}

// TakeN returns n ports, as Take does.
func (p *Ports) TakeN(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		port, err := p.Take()
		if err != nil {
			return nil, err
		}
		out = append(out, port)
	}
	return out, nil
}
