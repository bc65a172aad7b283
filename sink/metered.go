package sink

import (
	"context"
	"math"
	"time"

	"github.com/drover-crawl/drover/page"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sinks' store metrics (drover_sink_*), labelled by
// campaign and sink kind (kafka, warc, postgres): never by the URI, which
// names hosts and paths. A nil *Metrics counts nothing.
type Metrics struct {
	latency *prometheus.HistogramVec // campaign, sink
	errors  *prometheus.CounterVec   // campaign, sink
}

// NewMetrics registers the sink metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	l := []string{"campaign", "sink"}
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "drover_sink_store_duration_seconds",
			Help:    "Time of one Store until the page is durable (Kafka acks=all, WARC synced, PostgreSQL committed), failed ones included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, l),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_sink_store_errors_total",
			Help: "Stores that failed (each try; the fetcher retries a sink that is down for a while)."}, l),
	}
	for _, c := range []prometheus.Collector{m.latency, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Metered returns s with each Store timed and its errors counted under
// campaign and kind; s itself when m is nil.
func (m *Metrics) Metered(s Sink, campaign, kind string) Sink {
	if m == nil {
		return s
	}
	return &metered{s: s, latency: m.latency.WithLabelValues(campaign, kind), errors: m.errors.WithLabelValues(campaign, kind)}
}

type metered struct {
	s       Sink
	latency prometheus.Observer
	errors  prometheus.Counter
}

func (m *metered) Store(ctx context.Context, p *page.Page) error {
	start := time.Now()
	err := m.s.Store(ctx, p)
	m.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.Inc()
	}
	return err
}

func (m *metered) Close() error { return m.s.Close() }

// BodyLimit is the sink's (bodyLimited), or no limit.
func (m *metered) BodyLimit() int64 {
	if bl, ok := m.s.(bodyLimited); ok {
		return bl.BodyLimit()
	}
	return math.MaxInt64
}

func (m *metered) placesBody() bool {
	bp, ok := m.s.(bodyPlacer)
	return ok && bp.placesBody()
}
