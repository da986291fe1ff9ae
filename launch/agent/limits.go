package agent

import (
	"net"
	"sync"
	"time"
)

// The agent listens on every interface of a worker, where any pod of the
// cluster can reach it, and a connection costs it memory from its first
// byte: goroutines and x/crypto's buffers, about 30 KiB for a peer that
// sends a banner and stalls, and up to 256 KiB more for one that sends most
// of a packet of the largest size x/crypto reads. These bound what
// connections that have not authenticated may take, as OpenSSH's
// MaxStartups, PerSourceMaxStartups and LoginGraceTime do for sshd; a
// connection that authenticates holds the job's key, and counts against
// none of them.
const (
	// DefaultMaxStartups is the number of unauthenticated connections a
	// server handles at once; more are closed as they are accepted. A
	// launcher makes one connection per worker per launch (Open MPI's
	// tree spawn, Hydra's proxies and PRRTE's daemons alike) and a
	// handshake takes milliseconds, so a job never nears 64; sshd's
	// default, 10:30:100, begins dropping at 10. A flood of any size
	// then adds about 6 MB to the agent's resident memory, and 21 MB at
	// worst (64 connections each holding most of a largest packet).
	DefaultMaxStartups = 64
	// DefaultPerSourceMaxStartups is the number of unauthenticated
	// connections a server handles at once from one IP address, so that
	// one pod cannot take all DefaultMaxStartups: it takes four sources
	// to fill them.
	DefaultPerSourceMaxStartups = 16
	// DefaultLoginGraceTime is how long a connection has to complete its
	// key exchange and authentication before it is closed, and so how long
	// a stalled one holds its slot. A launcher's takes milliseconds; 30 s
	// leaves room for a worker whose CPUs its ranks keep busy (sshd's
	// default is 120 s).
	DefaultLoginGraceTime = 30 * time.Second
)

// startups counts the connections a server has accepted that have not
// finished their handshake, in all and by source address, and refuses
// those beyond its limits. The count of a source is deleted when it falls
// to zero, so the map holds at most max entries.
type startups struct {
	max, perSource int

	mu       sync.Mutex
	total    int
	bySource map[string]int
}

func newStartups(max, perSource int) *startups {
	return &startups{max: max, perSource: perSource, bySource: map[string]int{}}
}

// acquire takes a slot for a connection from source, or reports false
// where none is free: max in all, or perSource of source's.
func (g *startups) acquire(source string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.max || g.bySource[source] >= g.perSource {
		return false
	}
	g.total++
	g.bySource[source]++
	return true
}

// release gives back a slot acquire took for source.
func (g *startups) release(source string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.bySource[source]--; g.bySource[source] <= 0 {
		delete(g.bySource, source)
	}
}

// sourceOf is the address a connection's slots are counted by: the
// remote IP, whatever its port.
func sourceOf(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return addr.String()
}

// refusalLogInterval is the least time between two log lines about
// refused connections, so that a flood does not flood the log too.
const refusalLogInterval = time.Minute
