package activities

import (
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/metrics/temporalmetrics"
	"github.com/drover-crawl/drover/sink"
)

// WorkerMetrics are a worker's metrics on one registry: the fetches and
// the sinks' stores (for Activities) and the Temporal SDK's (for
// client.Options.MetricsHandler). They live here, not in node, so that a
// process without activities (a scheduler) does not link the fetcher and
// the sinks.
type WorkerMetrics struct {
	Fetch    *Metrics
	Sinks    *sink.Metrics
	Temporal client.MetricsHandler
	closer   io.Closer
}

// NewWorkerMetrics registers a worker's metrics on reg.
func NewWorkerMetrics(reg *prometheus.Registry, log *slog.Logger) (*WorkerMetrics, error) {
	f, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	s, err := sink.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	h, closer, err := temporalmetrics.TemporalHandler(reg, log)
	if err != nil {
		return nil, err
	}
	return &WorkerMetrics{Fetch: f, Sinks: s, Temporal: h, closer: closer}, nil
}

// Instrument sets a's metrics.
func (m *WorkerMetrics) Instrument(a *Activities) {
	a.Metrics, a.SinkMetrics = m.Fetch, m.Sinks
}

// Close flushes the Temporal metrics; call it after the client is closed.
func (m *WorkerMetrics) Close() error { return m.closer.Close() }
