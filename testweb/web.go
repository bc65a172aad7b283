package testweb

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// portTries bounds the search for a port free on every host IP.
const portTries = 20

// Web is a running test web. Its methods are safe for concurrent use.
type Web struct {
	cfg Config

	// Built or generated at Start, read-only afterwards.
	layout
	assetWeb // asset mode only
	// extraLinks are absolute URLs off the web that its pages link to
	// (StartDead): every root links to all of them, every other page to
	// one.
	extraLinks []string
	pages      []string // what Pages returns
	robots     [][]byte // by host index
	dataBin    []byte

	versions // the pages' current states and the web's clock
	largeState

	servers []*http.Server
	serving sync.WaitGroup
	// accepted counts the connections the servers accepted.
	accepted atomic.Int64
	holdGate

	closeOnce sync.Once
	closeErr  error

	requestLog
}

// Start binds one listener per host IP (and the CDN's, in asset mode),
// generates every page and serves until Close. It fails when cfg is invalid
// or a host IP cannot be bound.
func Start(cfg Config) (*Web, error) { return start(cfg, nil) }

// start is Start with links to extra (absolute URLs) in the pages.
func start(cfg Config, extra []string) (*Web, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bound := cfg.Hosts
	if cfg.Assets {
		bound++ // the CDN, index Hosts
	}
	ips := make([]string, bound)
	for i := range ips {
		n := i + 1
		ips[i] = fmt.Sprintf("127.%d.%d.%d", cfg.Base, n>>8, n&0xff)
	}
	lns, port, err := listenAll(ips, cfg.Port)
	if err != nil {
		return nil, err
	}
	cfg.Port = port
	w := &Web{
		cfg:        cfg,
		layout:     newLayout(cfg, ips, port),
		extraLinks: extra,
	}
	if cfg.Assets {
		cdn := net.JoinHostPort(ips[cfg.Hosts], strconv.Itoa(port))
		w.assetWeb = newAssetWeb(w.addrs, cdn, cfg.PagesPerHost)
	}
	// Generated after binding because absolute links carry the port; clients
	// that connect meanwhile wait in the listen backlog.
	w.generate()
	for i, ln := range lns {
		srv := &http.Server{
			Handler:           w.handler(i),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					w.accepted.Add(1)
				}
			},
		}
		w.servers = append(w.servers, srv)
		w.serving.Add(1)
		go func() {
			defer w.serving.Done()
			_ = srv.Serve(ln) // returns http.ErrServerClosed after Close
		}()
	}
	return w, nil
}

// Connections is the number of connections the web's hosts accepted
// (robots.txt and pages; the CDN's too, in asset mode): with the pages
// requested, it tells how many requests a client's keep-alive served.
func (w *Web) Connections() int64 { return w.accepted.Load() }

// listenAll binds port on every IP; port 0 picks one that is free on all.
func listenAll(ips []string, port int) ([]net.Listener, int, error) {
	if port != 0 {
		lns, err := bindAll(ips, port)
		return lns, port, err
	}
	var lastErr error
	for range portTries {
		first, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			return nil, 0, fmt.Errorf("testweb: listen on %s: %w", ips[0], err)
		}
		p := first.Addr().(*net.TCPAddr).Port
		rest, err := bindAll(ips[1:], p)
		if err == nil {
			return append([]net.Listener{first}, rest...), p, nil
		}
		_ = first.Close()
		lastErr = err
	}
	return nil, 0, fmt.Errorf("testweb: no port free on all %d host IPs after %d tries: %w", len(ips), portTries, lastErr)
}

// bindAll binds port on every IP, or none of them.
func bindAll(ips []string, port int) ([]net.Listener, error) {
	lns := make([]net.Listener, 0, len(ips))
	for _, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("testweb: listen on %s:%d: %w", ip, port, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// Close stops every server and closes their connections; it waits for the
// accept loops to end. Calls after the first return the first result.
func (w *Web) Close() error {
	w.closeOnce.Do(func() {
		var errs []error
		for _, srv := range w.servers {
			if err := srv.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		w.serving.Wait()
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}

// Config returns the effective config: defaults applied, Port the bound port.
func (w *Web) Config() Config { return w.cfg }

// Pages returns every URL a complete crawl that obeys robots.txt must fetch:
// the HTML pages of every host, on host 0 /redirect, /missing and
// /data.bin, then the second URLs of Config.Duplicates. It excludes
// robots.txt, disallowed URLs and calendar pages.
func (w *Web) Pages() []string { return append([]string(nil), w.pages...) }
