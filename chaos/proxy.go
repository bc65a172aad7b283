// Package chaos breaks drover's dependencies, one at a time, in the middle
// of a crawl, and counts what the crawl lost: the suite behind `make chaos`.
// Its pieces (a TCP proxy that cuts or partitions, a private
// RabbitMQ node, a gated Kafka listener) are usable by tests too.
package chaos

import (
	"errors"
	"net"
	"sync"
)

// Proxy forwards TCP connections from its listener to a target address, and
// breaks them on demand:
//
//   - Cut closes every open connection (both sides see a reset or EOF) and
//     closes new ones at once, as a service that went away would;
//   - Partition stops forwarding bytes in both directions, holding what it
//     read and accepting new connections without dialling the target, as a
//     network partition would: nothing arrives, nothing is refused, and
//     each side finds out only by its own timeouts;
//   - Heal ends either: held bytes are delivered, in order, held
//     connections are dialled, as TCP does once a partition is over.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	state  proxyState
	healed chan struct{} // closed when a partition ends
	conns  map[net.Conn]struct{}
	closed bool
}

type proxyState int

const (
	proxyUp proxyState = iota
	proxyCut
	proxyPartitioned
)

// NewProxy listens on listen ("127.0.0.1:0" for a free port) and forwards to
// target.
func NewProxy(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, healed: make(chan struct{})}
	close(p.healed)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = proxyCut
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Partition stops all traffic until Heal, closing nothing.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != proxyPartitioned {
		p.healed = make(chan struct{})
	}
	p.state = proxyPartitioned
}

// Heal lets traffic through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == proxyPartitioned {
		close(p.healed)
	}
	p.state = proxyUp
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	return p.ln.Close()
}

// gate returns nil when traffic may pass now, a channel closed when a
// partition ends, or errCut when the connection must be closed.
func (p *Proxy) gate() (<-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed || p.state == proxyCut:
		return nil, errCut
	case p.state == proxyPartitioned:
		return p.healed, nil
	}
	return nil, nil
}

var errCut = errors.New("proxy cut")

// wait blocks while partitioned; it returns errCut when the proxy was cut
// or closed meanwhile.
func (p *Proxy) wait() error {
	for {
		ch, err := p.gate()
		if err != nil || ch == nil {
			return err
		}
		<-ch
	}
}

// track registers c, unless the proxy is cut or closed: then it closes c,
// as Cut and Close do with the connections they hold, and returns false.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.state == proxyCut {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.track(c) {
			go p.serve(c)
		}
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.untrack(client)
	defer client.Close()
	if p.wait() != nil {
		return
	}
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(upstream) {
		return
	}
	defer p.untrack(upstream)
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(upstream, client); done <- struct{}{} }()
	go func() { p.pipe(client, upstream); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, holding each chunk while partitioned.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.wait() != nil {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// No half-close: the protocols proxied here (AMQP, the session
			// protocol, PostgreSQL) end a connection as a whole.
			return
		}
	}
}
