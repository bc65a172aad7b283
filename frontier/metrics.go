// Prometheus metrics of a scheduler (RegisterMetrics). Counters that the
// actors already keep for Stats are read at scrape time; leases, dead
// letters, links found and the latencies are counted where they happen,
// by nil-safe hooks that cost nothing when no registry is attached.
//
// Labels: campaign (and a bounded kind, reason or queue name); never a URL
// or a host, so the series stay bounded by the campaigns served.

package frontier

import (
	"errors"
	"sync"
	"time"

	"github.com/drover-crawl/drover/session"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
)

// queueScrapeTimeout bounds the RabbitMQ queue inspection of one scrape; a
// RabbitMQ that does not answer leaves the queue depths out of it.
const queueScrapeTimeout = 5 * time.Second

// schedMetrics are the metrics counted where they happen.
type schedMetrics struct {
	leases         *prometheus.CounterVec   // campaign, kind (page, robots)
	expired        *prometheus.CounterVec   // campaign
	returned       *prometheus.CounterVec   // campaign
	deadLettered   *prometheus.CounterVec   // campaign, reason
	linksFound     *prometheus.CounterVec   // campaign
	linksKnown     *prometheus.CounterVec   // campaign
	politeness     *prometheus.HistogramVec // campaign
	confirmLatency prometheus.Histogram
}

// RegisterMetrics registers the scheduler's metrics on reg (call it once,
// before Serve). Every name starts with drover_scheduler_.
func (s *Server) RegisterMetrics(reg prometheus.Registerer) error {
	const ns, sub = "drover", "scheduler"
	c := []string{"campaign"}
	m := &schedMetrics{
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "leases_granted_total",
			Help: "Leases handed to fetchers, by kind (page or robots)."}, []string{"campaign", "kind"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "leases_expired_total",
			Help: "Leases whose deadline passed without a report; their URLs went back to their hosts."}, c),
		returned: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "leases_returned_total",
			Help: "Leases given back unfetched: released by their fetcher (pause, stop) or their session closed."}, c),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "dead_lettered_total",
			Help: "URLs moved to the dead-letter queue, by reason."}, []string{"campaign", "reason"}),
		linksFound: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "links_discovered_total",
			Help: "Links fetchers reported in stored pages, before dedup (drover_scheduler_links_published_total are the new ones)."}, c),
		linksKnown: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "links_known_total",
			Help: "Of drover_scheduler_links_discovered_total, the links fetchers left out of their reports because this scheduler had recorded them already (their workers' known links)."}, c),
		politeness: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "politeness_wait_seconds",
			Help:    "Time from a URL's delivery to this scheduler to its first lease: its host's politeness delay and concurrency cap, and the fetchers' credit.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60}}, c),
		confirmLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "publish_confirm_seconds",
			Help:    "Time from the first publish of a batch (links, parked or dead-lettered URLs, seeds) to RabbitMQ's last confirm of it.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}}),
	}
	for _, col := range []prometheus.Collector{m.leases, m.expired, m.returned, m.deadLettered, m.linksFound, m.linksKnown, m.politeness, m.confirmLatency, newServerCollector(s)} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	s.metrics.Store(m)
	observe := func(d time.Duration) { m.confirmLatency.Observe(d.Seconds()) }
	s.pub.confirmed.Store(&observe)
	return nil
}

// m returns the scheduler's hooks; nil without RegisterMetrics.
func (s *Server) m() *schedMetrics { return s.metrics.Load() }

func (m *schedMetrics) leaseGranted(c string, robots bool) {
	if m == nil {
		return
	}
	kind := "page"
	if robots {
		kind = "robots"
	}
	m.leases.WithLabelValues(c, kind).Inc()
}

func (m *schedMetrics) leaseExpired(c string) {
	if m != nil {
		m.expired.WithLabelValues(c).Inc()
	}
}

func (m *schedMetrics) leaseReturned(c string) {
	if m != nil {
		m.returned.WithLabelValues(c).Inc()
	}
}

func (m *schedMetrics) deadLetter(c, reason string) {
	if m != nil {
		m.deadLettered.WithLabelValues(c, session.MetricReason(reason)).Inc()
	}
}

func (m *schedMetrics) linksDiscovered(c string, n int) {
	if m != nil && n > 0 {
		m.linksFound.WithLabelValues(c).Add(float64(n))
	}
}

func (m *schedMetrics) linksLeftOut(c string, n int) {
	if m != nil && n > 0 {
		m.linksKnown.WithLabelValues(c).Add(float64(n))
	}
}

func (m *schedMetrics) politenessWait(c string, d time.Duration) {
	if m != nil {
		m.politeness.WithLabelValues(c).Observe(max(d, 0).Seconds())
	}
}

// open starts a campaign's counters at 0, so that a rate over them exists
// (and is 0) before their first event.
func (m *schedMetrics) open(c string) {
	if m == nil {
		return
	}
	m.leases.WithLabelValues(c, "page")
	m.leases.WithLabelValues(c, "robots")
	m.expired.WithLabelValues(c)
	m.returned.WithLabelValues(c)
	m.linksFound.WithLabelValues(c)
}

// forget drops a closed campaign's series.
func (m *schedMetrics) forget(c string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"campaign": c}
	m.leases.DeletePartialMatch(l)
	m.expired.DeletePartialMatch(l)
	m.returned.DeletePartialMatch(l)
	m.deadLettered.DeletePartialMatch(l)
	m.linksFound.DeletePartialMatch(l)
	m.politeness.DeletePartialMatch(l)
}

// serverCollector reads, at each scrape, what the campaign actors and the
// seen store already keep, and the campaigns' queue depths from RabbitMQ.
type serverCollector struct {
	s *Server
	// qrun: the last queue inspection (collectQueues).
	qmu  sync.Mutex
	qrun *queueRun

	counters   map[string]*prometheus.Desc // name -> desc, labelled campaign
	gauges     map[string]*prometheus.Desc
	failures   *prometheus.Desc // campaign, reason
	queue      *prometheus.Desc // campaign, queue
	dead       *prometheus.Desc // campaign
	seen       *prometheus.Desc
	compacting *prometheus.Desc
}

func newServerCollector(s *Server) *serverCollector {
	name := func(n string) string { return prometheus.BuildFQName("drover", "scheduler", n) }
	c := []string{"campaign"}
	col := &serverCollector{s: s, counters: map[string]*prometheus.Desc{}, gauges: map[string]*prometheus.Desc{}}
	for n, help := range map[string]string{
		"pages_recorded_total":       "Pages (any status) whose outcome this scheduler recorded.",
		"pages_unchanged_total":      "Pages recorded as revisits of their last capture (a 304, or the same payload digest), counted in pages_recorded_total too.",
		"fetch_failures_total":       "Fetches that ended in a permanent error with no response, recorded.",
		"urls_retried_total":         "URLs parked for a later attempt (network error, 5xx, 429).",
		"urls_disallowed_total":      "URLs robots.txt forbade, dropped when their turn came.",
		"dedup_hits_total":           "Deliveries dropped as already done or in flight here.",
		"links_published_total":      "New links published to the frontier, confirmed.",
		"publishes_total":            "Messages published and confirmed (links, parked, dead-lettered).",
		"deliveries_acked_total":     "Deliveries acked.",
		"record_failures_total":      "Outcome batches whose recording failed (publish or seen store); their URLs went back.",
		"urls_skipped_total":         "URLs dropped by max-pages-per-host.",
		"robots_dropped_links_total": "Links robots.txt forbids, recorded instead of published.",
		"shared_clock_waits_total":   "Leases put off because another request under the host's politeness key (host, domain, group or IP), of any campaign, came first (the clocks all campaigns share).",
		"remote_slot_asks_total":     "Starts asked of the scheduler that owns an IP key's clock (politeness_key ip), one round trip each.",
		"parks_moved_total":          "Park messages this scheduler's park mover published back to their shards when their wait ended.",
		"park_move_errors_total":     "Moves of park messages back to their shards that RabbitMQ refused or did not confirm in time; each is tried again while the mover holds the messages.",
	} {
		col.counters[n] = prometheus.NewDesc(name(n), help, c, nil)
	}
	for n, help := range map[string]string{
		"deliveries_held":   "Deliveries held unacked here: waiting for their host, leased, or being recorded.",
		"leases_in_flight":  "Leases handed to fetchers and not yet reported.",
		"publishes_pending": "Publish batches not yet confirmed.",
		"sessions":          "Fetcher sessions connected.",
		"hosts":             "Hosts this scheduler has seen, in memory or forgotten while idle.",
		"hosts_forgotten":   "Hosts forgotten while idle (the scheduler's -host-idle): counted in hosts, with only their page count kept.",
		"hosts_down":        "Hosts failed for the campaign (unreachable after their retries).",
		"record_backlog":    "Outcomes and their links waiting to be recorded; past the scheduler's -record-backlog no lease is granted.",
		"consuming":         "1 when this scheduler consumes the campaign's shards.",
		"parked_moving":     "Park messages this scheduler's park mover holds until their wait ends (unacked in their park queue).",
	} {
		col.gauges[n] = prometheus.NewDesc(name(n), help, c, nil)
	}
	col.failures = prometheus.NewDesc(name("failures_total"), "URLs that did not become a page, and pages with an error status, by reason (what `starter status` counts).", []string{"campaign", "reason"}, nil)
	col.queue = prometheus.NewDesc(name("queue_depth"), "Messages ready in a shard (queue=s00..) or parking queue (queue=park.1s..), as RabbitMQ counts them; every scheduler of a campaign reports the same.", []string{"campaign", "queue"}, nil)
	col.dead = prometheus.NewDesc(name("dead_letter_depth"), "Messages in the campaign's dead-letter queue.", c, nil)
	col.seen = prometheus.NewDesc(name("seen_store_bytes"), "Disk space of the seen store (0 in memory).", nil, nil)
	col.compacting = prometheus.NewDesc(name("seen_store_compactions"), "Compactions of the seen store running now.", nil, nil)
	return col
}

// Describe implements prometheus.Collector.
func (col *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range col.counters {
		ch <- d
	}
	for _, d := range col.gauges {
		ch <- d
	}
	ch <- col.failures
	ch <- col.queue
	ch <- col.dead
	ch <- col.seen
	ch <- col.compacting
}

// Collect implements prometheus.Collector.
func (col *serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := col.s
	s.mu.Lock()
	actors := make([]*campaignActor, 0, len(s.campaigns))
	for _, a := range s.campaigns {
		actors = append(actors, a)
	}
	s.mu.Unlock()
	// The label is the campaign's ID; its queues are named by its run's
	// frontier key.
	var runs []campaignRun
	for _, a := range actors {
		id := a.cfg.ID
		runs = append(runs, campaignRun{id: id, key: a.key})
		counter := func(n string, v int64) {
			ch <- prometheus.MustNewConstMetric(col.counters[n], prometheus.CounterValue, float64(v), id)
		}
		gauge := func(n string, v int64) {
			ch <- prometheus.MustNewConstMetric(col.gauges[n], prometheus.GaugeValue, float64(v), id)
		}
		counter("pages_recorded_total", a.fetched.Load())
		counter("pages_unchanged_total", a.unchanged.Load())
		counter("fetch_failures_total", a.failed.Load())
		counter("urls_retried_total", a.retried.Load())
		counter("urls_disallowed_total", a.disallowed.Load())
		counter("dedup_hits_total", a.duplicates.Load())
		counter("links_published_total", a.discovered.Load())
		counter("publishes_total", a.published.Load())
		counter("deliveries_acked_total", a.acked.Load())
		counter("record_failures_total", a.recordFailed.Load())
		counter("urls_skipped_total", a.skipped.Load())
		counter("robots_dropped_links_total", a.robotsDropped.Load())
		counter("shared_clock_waits_total", a.clockWaits.Load())
		counter("remote_slot_asks_total", a.remoteAsks.Load())
		counter("parks_moved_total", a.parkMoves.moved.Load())
		counter("park_move_errors_total", a.parkMoves.refused.Load())
		gauge("parked_moving", a.parkMoves.moving.Load())
		gauge("deliveries_held", a.unacked.Load())
		gauge("leases_in_flight", a.inflight.Load())
		gauge("publishes_pending", a.pending.Load())
		gauge("sessions", a.nsessions.Load())
		gauge("hosts", a.nhosts.Load())
		gauge("hosts_forgotten", a.nforgotten.Load())
		gauge("record_backlog", a.recBacklog.Load())
		gauge("hosts_down", a.hostsDown.Load())
		var consuming int64
		if a.isConsuming.Load() {
			consuming = 1
		}
		gauge("consuming", consuming)
		byReason := map[string]int64{}
		for r, n := range a.reasonCounts() {
			byReason[session.MetricReason(r)] += n
		}
		for r, n := range byReason {
			ch <- prometheus.MustNewConstMetric(col.failures, prometheus.CounterValue, float64(n), id, r)
		}
	}
	var disk, compacting float64
	if d, ok := s.store.(interface{ DiskBytes() int64 }); ok {
		disk = float64(d.DiskBytes())
	}
	if c, ok := s.store.(interface{ Compacting() int }); ok {
		compacting = float64(c.Compacting())
	}
	ch <- prometheus.MustNewConstMetric(col.seen, prometheus.GaugeValue, disk)
	ch <- prometheus.MustNewConstMetric(col.compacting, prometheus.GaugeValue, compacting)
	if len(runs) > 0 {
		col.collectQueues(ch, runs)
	}
}

// collectQueues reports the depth of each campaign's queues. One
// inspection runs at a time and scrapes that come while it runs share its
// result (Prometheus and a curl at once); it is bounded by
// queueScrapeTimeout, and a RabbitMQ away or slow leaves the depths out of
// the scrape (an invalid metric: the endpoint logs it and serves the rest).
func (col *serverCollector) collectQueues(ch chan<- prometheus.Metric, runs []campaignRun) {
	col.qmu.Lock()
	run := col.qrun
	if run == nil || (run.finished() && time.Since(run.at) > queueShareFor) {
		run = &queueRun{at: time.Now(), done: make(chan struct{})}
		col.qrun = run
		go run.inspect(col.s, runs)
	}
	col.qmu.Unlock()
	t := time.NewTimer(queueScrapeTimeout)
	defer t.Stop()
	select {
	case <-run.done:
	case <-t.C:
		ch <- prometheus.NewInvalidMetric(col.queue, errors.New("RabbitMQ did not answer the queue inspection in time"))
		return
	}
	if run.err != nil {
		ch <- prometheus.NewInvalidMetric(col.queue, run.err)
		return
	}
	for _, d := range run.depths {
		if d.queue == "dead" {
			ch <- prometheus.MustNewConstMetric(col.dead, prometheus.GaugeValue, float64(d.n), d.id)
			continue
		}
		ch <- prometheus.MustNewConstMetric(col.queue, prometheus.GaugeValue, float64(d.n), d.id, d.queue)
	}
}

// queueShareFor: a finished inspection younger than this answers a scrape.
const queueShareFor = 250 * time.Millisecond

// queueRun is one inspection of the campaigns' queues.
type queueRun struct {
	at     time.Time
	done   chan struct{}
	depths []queueDepth // valid once done is closed
	err    error
}

// campaignRun names a campaign's run: its ID, the metrics' label, and its
// frontier key, which names its queues.
type campaignRun struct{ id, key string }

type queueDepth struct {
	id, queue string
	n         int64
}

func (r *queueRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *queueRun) inspect(s *Server, runs []campaignRun) {
	defer close(r.done)
	conn, err := s.mq.get()
	if err != nil {
		r.err = err
		return
	}
	for _, run := range runs {
		ds, err := queueDepths(conn, Topology{Campaign: run.key})
		if err != nil {
			r.err = err
			return
		}
		for q, n := range ds {
			r.depths = append(r.depths, queueDepth{run.id, q, n})
		}
	}
}

// queueDepths returns the ready messages of each of t's queues, by its
// short name (s00.., park.1s.., dead); a queue not declared is left out.
func queueDepths(conn *amqp.Connection, t Topology) (map[string]int64, error) {
	out := map[string]int64{}
	err := t.inspect(conn, func(name string, q amqp.Queue) {
		out[name[len(t.prefix()):]] = int64(q.Messages)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
