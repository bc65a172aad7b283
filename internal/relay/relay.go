// Package relay forwards TCP connections for tests: a front (a gate that
// holds connections, a TLS terminator) before a server under test.
package relay

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// dialWithin bounds the dial to the target, a server on loopback.
const dialWithin = 5 * time.Second

// Serve accepts connections on ln until the test ends. It hands each one,
// numbered from 1, to admit (nil: admit all), which may hold it until quit
// is closed; an admitted connection is joined, both ways, to a new
// connection to target until either side ends. When the test ends, Serve
// closes ln and quit, and waits until every connection is closed.
func Serve(t testing.TB, ln net.Listener, target string, admit func(n int, quit <-chan struct{}) bool) {
	var wg sync.WaitGroup
	quit := make(chan struct{})
	t.Cleanup(func() {
		close(quit)
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if admit != nil && !admit(n, quit) {
					return
				}
				s, err := net.DialTimeout("tcp", target, dialWithin)
				if err != nil {
					return
				}
				defer s.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(s, c); done <- struct{}{} }()
				go func() { io.Copy(c, s); done <- struct{}{} }()
				select {
				case <-done:
				case <-quit:
				}
			})
		}
	})
}
