package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"time"
)

// Sizes of the crowd: listeners holding ephemeral ports, and outgoing
// connections that stay open a moment and are opened again.
const (
	heldListeners   = 300
	openConnections = 200
)

// crowding is what pressure prints once it holds its listeners and its
// connections churn: the spec starts the cluster only then.
const crowding = "crowding the ephemeral ports"

// pressure crowds the kernel's ephemeral ports the way a busy machine
// does, until the process is killed: it holds hundreds of listeners bound
// to port 0, keeps hundreds of outgoing connections open and renews them,
// and keeps listening anew on port 0: a port picked by listening on :0 and
// closing can be taken by any of these before its component binds it,
// which the supervisor must survive.
func pressure() error {
	var held []net.Listener
	for range heldListeners {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		held = append(held, l)
	}
	target := held[0]
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			// Held until the client closes, so that the client's side
			// is the one that keeps its ephemeral port longest.
			go func() {
				_, _ = c.Read(make([]byte, 1))
				c.Close()
			}()
		}
	}()
	for range openConnections {
		go func() {
			for {
				c, err := net.Dial("tcp", target.Addr().String())
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond)
				c.Close()
			}
		}()
	}
	fmt.Println(crowding)
	// Listening anew on :0, again and again, takes a port from the same
	// pool for a moment, exactly as the old port picking did.
	for {
		if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
			time.Sleep(time.Millisecond)
			l.Close()
		}
	}
}
