package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// banner is what a flood's connections send before they stall.
const banner = "SSH-2.0-OpenSSH_9.6\r\n"

// Sources of connections: loopback addresses other than 127.0.0.1 stand for
// other pods (Linux routes all of 127.0.0.0/8 to the loopback interface).
const (
	source1 = "127.0.0.1"
	source2 = "127.0.0.2"
	source3 = "127.0.0.3"
)

// dialFrom opens a TCP connection to addr from source's address.
func dialFrom(t *testing.T, addr, source string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: waitTimeout}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("%s is not a loopback address here: %v", source, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stall connects from source as a flood does, sending an SSH banner and
// nothing more, and tells whether the server took the connection up
// (answered with its own banner, as it does first of all) or refused it
// (closed it unanswered).
func stall(t *testing.T, addr, source string) (c net.Conn, held bool) {
	t.Helper()
	c = dialFrom(t, addr, source)
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	_, err := io.WriteString(c, banner)
	var got [4]byte
	if err == nil {
		_, err = io.ReadFull(c, got[:])
	}
	switch {
	case err == nil && string(got[:]) == "SSH-":
		return c, true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return c, false
	default:
		t.Fatalf("a connection from %s: read %q, %v; want the server's banner or the connection closed", source, got, err)
		return nil, false
	}
}

// eventuallyHeld tells whether the server takes up a stalled connection
// from source within waitTimeout.
func eventuallyHeld(t *testing.T, addr, source string) bool {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c, ok := stall(t, addr, source)
		if ok {
			return true
		}
		c.Close()
	}
	return false
}

// logSays tells whether the server's log comes to hold want within
// waitTimeout. The server writes its line about a connection after the
// connection is closed (the SSH library closes it when the handshake
// fails), so a client that has seen the close has not always seen the line.
func (j *job) logSays(want string) bool {
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(j.log.String(), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// waitClosed fails unless the server closes c within waitTimeout.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a stalled connection from %s: %v; want it closed by the server", c.LocalAddr(), err)
	}
}

// login authenticates with the job's key from source.
func (j *job) login(t *testing.T, source string) (*ssh.Client, error) {
	t.Helper()
	nc := dialFrom(t, j.addr, source)
	_ = nc.SetDeadline(time.Now().Add(waitTimeout))
	sc, chans, reqs, err := ssh.NewClientConn(nc, j.addr, j.sshConfig(t))
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	c := ssh.NewClient(sc, chans, reqs)
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// output runs command in a new session of c.
func output(c *ssh.Client, command string) (string, error) {
	sess, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	out, err := sess.Output(command)
	return string(out), err
}

type flood struct {
	source string
	n      int
}

// TestMaxStartups floods a server with connections that send a banner and
// stall: it takes up as many as its limits allow, in all and from each
// source, and closes the rest as soon as they come; job's key holders get
// in where a slot is free.
func TestMaxStartups(t *testing.T) {
	for name, tc := range map[string]struct {
		max, perSource int
		floods         []flood
		// wantHeld is how many connections of each source the server
		// takes up.
		wantHeld map[string]int
		// logins are the sources the job's client then logs in from,
		// and whether it gets in.
		logins map[string]bool
	}{
		"one source, beyond the total": {
			max: 4, perSource: 4,
			floods:   []flood{{source1, 7}},
			wantHeld: map[string]int{source1: 4},
			// The price of a bound, which sshd pays too: while
			// stalled connections hold every slot, nobody gets in.
			logins: map[string]bool{source1: false, source2: false},
		},
		"one source, beyond its share": {
			max: 8, perSource: 3,
			floods:   []flood{{source1, 6}},
			wantHeld: map[string]int{source1: 3},
			logins:   map[string]bool{source1: false, source2: true},
		},
		"sources beyond the total": {
			max: 5, perSource: 3,
			floods:   []flood{{source1, 4}, {source2, 4}, {source3, 1}},
			wantHeld: map[string]int{source1: 3, source2: 2},
			logins:   map[string]bool{source3: false},
		},
		"within the limits": {
			max: 5, perSource: 3,
			floods:   []flood{{source1, 2}, {source2, 2}},
			wantHeld: map[string]int{source1: 2, source2: 2},
			logins:   map[string]bool{source3: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := startJobWith(t, func(s *Server) {
				s.MaxStartups, s.PerSourceMaxStartups = tc.max, tc.perSource
				// Long enough that no connection's ends in the test.
				s.LoginGraceTime = time.Hour
			})
			held, refused := map[string]int{}, 0
			for _, f := range tc.floods {
				for range f.n {
					refused++
					if _, ok := stall(t, j.addr, f.source); ok {
						held[f.source]++
						refused--
					}
				}
			}
			if fmt.Sprint(held) != fmt.Sprint(tc.wantHeld) {
				t.Errorf("connections the server took up, by source: %v; want %v", held, tc.wantHeld)
			}
			for source, want := range tc.logins {
				c, err := j.login(t, source)
				if (err == nil) != want {
					t.Errorf("logging in from %s: %v; want success %t", source, err, want)
				}
				if err != nil {
					continue
				}
				// An authenticated connection holds no slot (once the
				// server, a moment after the client, is done with its
				// handshake).
				c.Close()
				if !eventuallyHeld(t, j.addr, source) {
					t.Errorf("connections from %s after a login from there are refused", source)
				}
			}
			if refused > 0 && !j.logSays("refused") {
				t.Errorf("the server's log does not tell of the refusals:\n%s", j.log)
			}
		})
	}
}

// TestLoginGraceTime stalls connections past the grace time: the server
// closes them, and the job's client then gets in.
func TestLoginGraceTime(t *testing.T) {
	const grace = 300 * time.Millisecond
	j := startJobWith(t, func(s *Server) {
		s.MaxStartups, s.PerSourceMaxStartups = 2, 2
		s.LoginGraceTime = grace
	})
	var stalled []net.Conn
	for range 2 {
		c, ok := stall(t, j.addr, source1)
		if !ok {
			t.Fatal("a first connection was refused")
		}
		stalled = append(stalled, c)
	}
	for _, c := range stalled {
		waitClosed(t, c)
	}
	if !j.logSays("not authenticated within " + grace.String()) {
		t.Errorf("the server's log does not tell of the grace time:\n%s", j.log)
	}
	c, err := j.login(t, source1)
	if err != nil {
		t.Fatalf("logging in once the stalled connections are closed: %v", err)
	}
	if out, err := output(c, "echo in"); err != nil || out != "in\n" {
		t.Errorf("a command = %q, %v; want %q", out, err, "in\n")
	}
}

// TestAuthenticatedOutlivesGrace shows that the grace time and the slots
// bind only connections that have not authenticated: a client that has
// logged in keeps its connection and runs commands past the grace time,
// and clients logged in are not counted.
func TestAuthenticatedOutlivesGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	j := startJobWith(t, func(s *Server) {
		s.MaxStartups, s.PerSourceMaxStartups = 1, 1
		s.LoginGraceTime = grace
	})
	first, err := j.login(t, source1)
	if err != nil {
		t.Fatal(err)
	}
	// A command that runs past the grace time.
	if out, err := output(first, "sleep 1; echo ran"); err != nil || out != "ran\n" {
		t.Errorf("a command running past the grace time = %q, %v; want %q", out, err, "ran\n")
	}
	second, err := j.login(t, source1)
	if err != nil {
		t.Fatalf("a second login while the first holds its connection: %v", err)
	}
	for i, c := range []*ssh.Client{first, second} {
		if out, err := output(c, "echo again"); err != nil || out != "again\n" {
			t.Errorf("client %d after the grace time = %q, %v; want %q", i+1, out, err, "again\n")
		}
	}
}

// floodSize is how many connections TestFloodMemory opens: without limits
// on unauthenticated connections, as many as the agent took up, at 28 KiB
// each for a banner alone.
const floodSize = 2000

// TestFloodMemory opens floodSize connections that stall, against a
// server at its default limits, and bounds how much more heap and stack
// the process, agent and flood together, uses then. The agent takes up
// DefaultMaxStartups of them; the flood's own connections, all open, take
// a few hundred bytes each.
func TestFloodMemory(t *testing.T) {
	for name, tc := range map[string]struct {
		// then is what a connection sends after its banner, once the
		// server has taken it up.
		then      string
		maxGrowth int64
	}{
		// About 30 KiB a connection: goroutines and x/crypto's buffers.
		"a banner": {maxGrowth: 8 << 20},
		// x/crypto allocates a packet's buffer as its length comes,
		// before its bytes do: 256 KiB more a connection.
		"a banner and the largest packet's length": {then: "\x00\x03\xff\xf0\x04", maxGrowth: 32 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			j := startJob(t)
			before := inUse()
			held := 0
			conns := make([]net.Conn, 0, floodSize)
			for i := range floodSize {
				// From eight sources, to reach the limit in all.
				c, ok := stall(t, j.addr, fmt.Sprintf("127.0.0.%d", 1+i%8))
				if ok {
					held++
					_, _ = io.WriteString(c, tc.then)
				}
				conns = append(conns, c)
			}
			growth := inUse() - before
			t.Logf("%d stalled connections, %d taken up: %d KiB more heap and stack", floodSize, held, growth>>10)
			if held > DefaultMaxStartups {
				t.Errorf("the server took up %d connections; want at most %d", held, DefaultMaxStartups)
			}
			if growth > tc.maxGrowth {
				t.Errorf("%d stalled connections grew heap and stack by %d KiB; want at most %d KiB", floodSize, growth>>10, tc.maxGrowth>>10)
			}
			for _, c := range conns {
				c.Close()
			}
		})
	}
}

// inUse is the heap and stack the process uses, once garbage is collected.
func inUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
