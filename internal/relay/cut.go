package relay

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Cutter forwards TCP connections to a target and can cut them from the
// client's side only: the client sees its connection reset, while the
// target keeps its end open, as a server does that has not yet noticed a
// peer gone (no FIN reached it: a NAT entry dropped, a cable pulled). Until
// Release, the target holds whatever it held for that connection (for
// RabbitMQ, its unacked deliveries and its consumers).
type Cutter struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	live   map[*cutPair]struct{}
	cut    []*cutPair
	cuts   int
	ended  bool
	refuse bool // partitioned: new connections are reset at once
}

type cutPair struct {
	client, server net.Conn
}

// NewCutter forwards connections accepted on a free loopback port to
// target until the test ends, when it closes every connection it holds.
func NewCutter(t testing.TB, target string) *Cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relay: listen: %v", err)
	}
	c := &Cutter{ln: ln, target: target, live: map[*cutPair]struct{}{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		c.ended = true
		for p := range c.live {
			p.client.Close()
			p.server.Close()
		}
		for _, p := range c.cut {
			p.server.Close()
		}
		c.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			cl, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			refuse := c.refuse
			c.mu.Unlock()
			if refuse {
				reset(cl)
				continue
			}
			srv, err := net.DialTimeout("tcp", target, dialWithin)
			if err != nil {
				cl.Close()
				continue
			}
			p := &cutPair{client: cl, server: srv}
			c.mu.Lock()
			if c.ended {
				c.mu.Unlock()
				cl.Close()
				srv.Close()
				return
			}
			c.live[p] = struct{}{}
			c.mu.Unlock()
			wg.Go(func() { c.pipe(p) })
		}
	})
	return c
}

// Addr is the relay's address (host:port).
func (c *Cutter) Addr() string { return c.ln.Addr().String() }

// pipe copies both ways. When the client's end closes (or is cut), the
// server's end stays open if the pair was cut, and closes otherwise.
func (c *Cutter) pipe(p *cutPair) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(p.server, p.client); done <- struct{}{} }()
	go func() { io.Copy(p.client, p.server); done <- struct{}{} }()
	<-done
	c.mu.Lock()
	_, live := c.live[p]
	delete(c.live, p)
	c.mu.Unlock()
	p.client.Close()
	if live {
		p.server.Close()
	}
	<-done
}

// Cut resets every live connection on the client's side and keeps the
// target's ends open until Release. It returns how many it cut.
func (c *Cutter) Cut() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for p := range c.live {
		delete(c.live, p)
		c.cut = append(c.cut, p)
		reset(p.client)
		n++
	}
	c.cuts += n
	return n
}

// Held is how many cut connections still hold the target's end open.
func (c *Cutter) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cut)
}

// Release closes the target's ends of the connections cut so far: the
// target then sees them end.
func (c *Cutter) Release() {
	c.mu.Lock()
	cut := c.cut
	c.cut = nil
	c.mu.Unlock()
	for _, p := range cut {
		p.server.Close()
	}
}

// Partition cuts every live connection (Cut) and resets every new one until
// Heal: to the clients the target is unreachable, while it still holds
// what it held for them. It returns how many connections it cut.
func (c *Cutter) Partition() int {
	c.mu.Lock()
	c.refuse = true
	c.mu.Unlock()
	return c.Cut()
}

// Heal ends a Partition: new connections reach the target again. The
// connections cut stay cut (Release ends them on the target's side).
func (c *Cutter) Heal() {
	c.mu.Lock()
	c.refuse = false
	c.mu.Unlock()
}

// reset closes conn with a reset, not a FIN.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
