package activities

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
)

// Metrics are a worker's fetch metrics (drover_*), labelled by campaign
// and a bounded class or reason, never by URL or host. A nil *Metrics
// counts nothing.
type Metrics struct {
	pages    *prometheus.CounterVec   // campaign, class
	failures *prometheus.CounterVec   // campaign, reason
	latency  *prometheus.HistogramVec // campaign
	bytes    *prometheus.CounterVec   // campaign
	robots   *prometheus.CounterVec   // campaign, class
	sessions *prometheus.GaugeVec     // campaign
	inFlight *prometheus.GaugeVec     // campaign
	dedup    *prometheus.CounterVec   // campaign, result
}

// NewMetrics registers the fetch metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c := []string{"campaign"}
	m := &Metrics{
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_pages_fetched_total",
			Help: "Page requests the server answered, by status class (2xx, 3xx, 4xx, 5xx; a 5xx or 429 to retry counts too); robots.txt not counted."}, []string{"campaign", "class"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_fetch_failures_total",
			Help: "Fetches that failed, by reason (dns, refused, timeout, 4xx, 5xx, sink, ...): an error status, a network error, or every sink refusing the page."}, []string{"campaign", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "drover_fetch_duration_seconds",
			Help:    "Time of a page fetch: connect, request, response and body, link extraction; storing not included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, c),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_fetch_bytes_total",
			Help: "Body bytes of the pages fetched, as the server sent them (up to the campaign's body cap, if any)."}, c),
		robots: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_robots_fetches_total",
			Help: "robots.txt fetches, by status class, or class=error without a response."}, []string{"campaign", "class"}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drover_fetch_sessions",
			Help: "FetchSession activities running in this worker: summed over the workers, the campaign's fleet."}, c),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drover_fetches_in_flight",
			Help: "Leases being fetched or stored in this worker."}, c),
		dedup: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_dedup_lookups_total",
			Help: "Payload digests looked up in the lineage's digest index before storing a page (campaigns with dedup), by result: hit (stored as a revisit), miss or error (stored in full)."}, []string{"campaign", "result"}),
	}
	for _, col := range []prometheus.Collector{m.pages, m.failures, m.latency, m.bytes, m.robots, m.sessions, m.inFlight, m.dedup} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// statusClass is "2xx" for 200..299 and so on; "other" outside 100..599.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

func (m *Metrics) session(c string, delta float64) {
	if m != nil {
		m.sessions.WithLabelValues(c).Add(delta)
	}
}

func (m *Metrics) inflight(c string, delta float64) {
	if m != nil {
		m.inFlight.WithLabelValues(c).Add(delta)
	}
}

func (m *Metrics) robotsFetched(c string, rr fetch.RobotsResult) {
	if m == nil {
		return
	}
	class := "error"
	if rr.Status > 0 {
		class = statusClass(rr.Status)
	}
	m.robots.WithLabelValues(c, class).Inc()
}

// fetched counts a page fetch that ran to its end (not cancelled).
func (m *Metrics) fetched(c string, res fetch.Result, took time.Duration) {
	if m == nil {
		return
	}
	m.latency.WithLabelValues(c).Observe(took.Seconds())
	status := res.Status // a response to retry
	if res.Page != nil {
		status = res.Page.Status
		m.bytes.WithLabelValues(c).Add(float64(res.Page.BodySize()))
	}
	if status > 0 {
		m.pages.WithLabelValues(c, statusClass(status)).Inc()
	}
	if res.Reason != "" {
		m.failures.WithLabelValues(c, session.MetricReason(res.Reason)).Inc()
	} else if status == 0 && (res.Err != nil || res.Page != nil && res.Page.Err != "") {
		m.failures.WithLabelValues(c, page.ReasonOther).Inc()
	}
}

// sinkFailed counts a page no sink stored.
func (m *Metrics) dedupLookup(c, result string) {
	if m != nil {
		m.dedup.WithLabelValues(c, result).Inc()
	}
}

func (m *Metrics) sinkFailed(c string) {
	if m != nil {
		m.failures.WithLabelValues(c, page.ReasonSink).Inc()
	}
}
