// Package metrics serves a drover process's Prometheus metrics: a registry
// with the Go runtime's and the process's collectors, an HTTP endpoint for
// it (/metrics). The Temporal SDK's metrics go on the same registry
// through its subpackage temporalmetrics, apart so that a process without
// a Temporal client (the scheduler) links none of the SDK.
//
// drover's own metrics are named drover_*; the SDK's temporal_*. Every
// drover metric is labelled by campaign at most, never by URL or host, so
// that the number of series stays bounded by the campaigns a process
// serves.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Default addresses of --metrics-addr: loopback, on the ports
// docker-compose.yml serves and its Prometheus scrapes.
const (
	DefaultWorkerAddr    = "127.0.0.1:9464"
	DefaultSchedulerAddr = "127.0.0.1:9465"
)

// Path is where the endpoint serves the metrics.
const Path = "/metrics"

// NewRegistry returns a registry holding the Go runtime's and the process's
// collectors; drover's packages register their metrics on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Server is a running metrics endpoint.
type Server struct {
	ln   net.Listener
	http *http.Server
	done chan error
}

// Serve listens on addr ("" or "off" serves nothing and returns nil, nil)
// and serves reg on /metrics until Close.
func Serve(addr string, reg *prometheus.Registry) (*Server, error) {
	mux := http.NewServeMux()
	// A collector that fails (RabbitMQ away for the queue depths) leaves
	// its metrics out of the scrape rather than failing all of it.
	mux.Handle(Path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: reg}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "drover: metrics at %s\n", Path)
	})
	return serve("metrics", addr, mux)
}

// ServeProfiles serves Go's profiles (net/http/pprof) on addr under
// /debug/pprof/ until Close; "" or "off" serves nothing and returns nil,
// nil. They tell anyone who reaches addr what the process holds: bind it
// to loopback.
func ServeProfiles(addr string) (*Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serve("profiles", addr, mux)
}

// serve serves mux on addr; "" or "off" serves nothing (nil, nil).
func serve(what, addr string, mux *http.ServeMux) (*Server, error) {
	if addr == "" || addr == "off" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	s := &Server{ln: ln, done: make(chan error, 1), http: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      time.Minute,
	}}
	go func() {
		err := s.http.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the endpoint's URL.
func (s *Server) URL() string { return "http://" + s.Addr() + Path }

// Close stops the endpoint; nil-safe (Serve of "" returns a nil Server).
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	return errors.Join(err, <-s.done)
}
