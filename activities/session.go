package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/workflows"
)

// heartbeatEvery is how often a FetchSession records a heartbeat (its
// counters). The SDK sends at most one per the worker's
// MaxHeartbeatThrottleInterval (temporalnode.HeartbeatThrottle); a pause reaches
// the session through its scheduler (EndSessions), and the cancellation on
// a heartbeat response only when the scheduler could not end it.
const heartbeatEvery = time.Second

// reconnectFor is how long a FetchSession tries to reach a scheduler before
// it fails (and the workflow restarts it).
const reconnectFor = 2 * time.Minute

// storeTimeout bounds one attempt to store a page; an attempt is not
// cancelled by a pause, so an in-flight outcome is recorded before the
// session ends.
const storeTimeout = 15 * time.Second

// storeRetryFor is how long a fetched page is kept and its store retried
// while a sink is down. The fetch slot stays busy meanwhile, so the fetcher
// stops taking leases (the crawl holds back instead of fetching pages it
// cannot store); the lease is renewed by the session's keepalive. After it,
// the URL is put aside (SinkFailed) and fetched again later.
const storeRetryFor = 2 * time.Minute

// FetchSession is one fetcher of the fleet: it holds a session to a
// scheduler, fetches what it is leased, stores pages in the sinks and
// reports outcomes, heartbeating its SessionCounters, until its ctx is
// cancelled (pause, stop, scale down: it then returns a canceled error
// carrying its counters, after its leases went back) or no scheduler can be
// reached for reconnectFor (an error the workflow answers by restarting it).
func (a *Activities) FetchSession(ctx context.Context, in workflows.FetchSessionInput) (workflows.SessionCounters, error) {
	cfg := in.Config.WithDefaults()
	if len(a.Schedulers) == 0 {
		return workflows.SessionCounters{}, temporal.NewNonRetryableApplicationError("no scheduler configured (DROVER_SCHEDULER)", "Config", nil)
	}
	f, release, err := acquireFetcher(ctx, cfg, a.Lookup)
	if err != nil {
		return workflows.SessionCounters{}, temporal.NewNonRetryableApplicationError(err.Error(), "Config", err)
	}
	defer release()
	r := NewRunner(cfg, f, nil, in.Index, a.Identity)
	r.m = a.Metrics
	r.scoreLink = a.LinkScorer
	// Heartbeats start before the sinks are opened: a session waiting on
	// the campaign's shared sinks still hears a cancel (within the
	// heartbeat throttle; a pause through the scheduler reaches it only
	// when it dials, as ErrEnded).
	stopBeat := r.heartbeat(ctx)
	defer stopBeat()
	sk, releaseSinks, err := acquireSinks(ctx, cfg, sink.Options{Campaign: cfg.ID, BodyCap: cfg.BodyCap, KafkaBrokers: a.KafkaBrokers, Metrics: a.SinkMetrics, Secrets: a.SinkSecrets})
	if err != nil {
		if ctx.Err() != nil {
			return r.Counters(), temporal.NewCanceledError(r.Counters())
		}
		return workflows.SessionCounters{}, temporal.NewApplicationErrorWithCause(err.Error(), "SinkUnavailable", err)
	}
	defer func() {
		// The last session of the campaign here closes the sinks: a
		// failed final flush or fsync is said, though every page whose
		// Store returned nil was already durable.
		if err := releaseSinks(); err != nil {
			activity.GetLogger(ctx).Error("closing the campaign's sinks", "err", err)
		}
	}()
	r.sk = sk
	known, releaseKnown, err := acquireKnownLinks(ctx, cfg.ID, activity.GetInfo(ctx).WorkflowExecution.RunID)
	if err != nil {
		return r.Counters(), temporal.NewCanceledError(r.Counters()) // only ctx ends it
	}
	defer releaseKnown()
	r.known = known
	crawlLog, releaseLog, err := acquireCrawlLog(ctx, cfg, a.Identity, sink.Options{KafkaBrokers: a.KafkaBrokers, Secrets: a.SinkSecrets})
	if err != nil {
		if ctx.Err() != nil {
			return r.Counters(), temporal.NewCanceledError(r.Counters())
		}
		return workflows.SessionCounters{}, temporal.NewApplicationErrorWithCause(err.Error(), "CrawlLogUnavailable", err)
	}
	defer func() {
		if err := releaseLog(); err != nil {
			activity.GetLogger(ctx).Error("closing the campaign's crawl log", "err", err)
		}
	}()
	r.log = crawlLog
	r.m.session(cfg.ID, 1)
	defer r.m.session(cfg.ID, -1)
	a.sessionRunning(cfg.ID, 1)
	defer a.sessionRunning(cfg.ID, -1)
	return a.serveSessions(ctx, r, cfg, in.Index)
}

// serveSessions runs r's sessions, on the schedulers from index on,
// reconnecting, until the campaign ends the session (through a scheduler,
// or by cancelling ctx) or no scheduler answers for reconnectFor.
func (a *Activities) serveSessions(ctx context.Context, r *Runner, cfg campaign.Config, index int) (workflows.SessionCounters, error) {
	client := fmt.Sprintf("%s/fetcher-%d", a.Identity, index)
	info := activity.GetInfo(ctx)
	key := workflows.SessionKey(info.WorkflowExecution.RunID, info.ActivityID)
	var lastOK = time.Now()
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return r.Counters(), temporal.NewCanceledError(r.Counters())
		}
		addr := a.Schedulers[(index+attempt)%len(a.Schedulers)]
		cl := a.sessions()
		cl.Known, cl.Resolves, cl.Rules = r.known, true, r.takeRules
		sess, err := cl.DialSessionKey(ctx, addr, client, key, cfg, cfg.FetcherConcurrency)
		if err != nil {
			if errors.Is(err, session.ErrEnded) {
				// Ended through a scheduler while this session was away:
				// done, as asked (the workflow is cancelling it).
				return r.Counters(), nil
			}
			if errors.Is(err, session.ErrRefused) || errors.Is(err, tlsconf.ErrPlaintext) {
				return r.Counters(), temporal.NewNonRetryableApplicationError(err.Error(), "SessionRefused", err)
			}
			if time.Since(lastOK) > reconnectFor {
				return r.Counters(), temporal.NewApplicationError(err.Error(), "SchedulerUnreachable")
			}
			activity.GetLogger(ctx).Warn("scheduler unreachable; retrying", "addr", addr, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		r.setScheduler(sess.Scheduler())
		if cfg.Dedup {
			r.digests = newDigestAsker(func(ctx context.Context) (*session.Control, error) { return cl.DialControl(ctx, addr) }, cfg.HistoryKey())
		}
		r.Run(ctx, sess)
		if r.digests != nil {
			r.digests.close()
			r.digests = nil
		}
		if sessionEnded(sess) {
			// The campaign ended it (pause, stop, scale-down, restart):
			// its outcomes are reported and its leases back, as after a
			// cancel; the workflow takes the counters as the session's.
			return r.Counters(), nil
		}
		lastOK = time.Now()
		if ctx.Err() == nil {
			activity.GetLogger(ctx).Warn("session ended; reconnecting", "addr", addr, "err", sess.Err())
		}
	}
}

// takeRules widens the fetcher's scope by the newer live rules a
// scheduler pushed (session.FrameRules): a live include holds from the
// next page's links on, without a new session.
func (r *Runner) takeRules(rules campaign.Rules) error {
	_, err := r.f.Scope().TakeRules(rules)
	return err
}

// sessionEnded reports whether the campaign ended sess through its
// scheduler: FrameEnd, or a refusal of its key that raced its hello.
func sessionEnded(sess *session.Session) bool {
	select {
	case <-sess.Ended():
		return true
	default:
		return errors.Is(sess.Err(), session.ErrEnded)
	}
}

// NewRunner returns the fetch loop of one fetcher: it serves sessions with
// f and sk. FetchSession wraps it with heartbeats and reconnects; tests of
// the frontier use it alone.
func NewRunner(cfg campaign.Config, f *fetch.Fetcher, sk sink.Sink, index int, identity string) *Runner {
	return &Runner{cfg: cfg, f: f, sk: sk, storeRetryFor: storeRetryFor, c: workflows.SessionCounters{Index: index, Worker: identity, Since: time.Now()}}
}

// Runner runs one fetcher's sessions.
type Runner struct {
	cfg campaign.Config
	f   *fetch.Fetcher
	sk  sink.Sink
	// storeRetryFor is the constant of that name; tests shorten it to
	// reach the SinkFailed outcome in seconds.
	storeRetryFor time.Duration
	// m counts the fetches (nil: not counted).
	m *Metrics
	// scoreLink scores the links found (Activities.LinkScorer).
	scoreLink fetch.LinkScorer
	// known is the campaign's links already recorded (acquireKnownLinks),
	// left out of the outcomes of the sessions FetchSession dials.
	known *session.KnownLinks
	// log is the campaign's crawl log (nil: it keeps none).
	log *crawlLog
	// digests looks payloads up in the digest index of the session's
	// scheduler (a campaign with Dedup; nil otherwise).
	digests *digestAsker

	mu sync.Mutex
	c  workflows.SessionCounters
}

// Counters returns the runner's counters now.
func (r *Runner) Counters() workflows.SessionCounters {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c
}

func (r *Runner) setScheduler(s string) {
	r.mu.Lock()
	r.c.Scheduler = s
	r.mu.Unlock()
}

func (r *Runner) count(f func(c *workflows.SessionCounters)) {
	r.mu.Lock()
	f(&r.c)
	r.mu.Unlock()
}

func (r *Runner) heartbeat(ctx context.Context) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx, r.Counters())
			select {
			case <-t.C:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Run serves one session until it ends, ctx is cancelled or the campaign
// ends it through the scheduler (Session.Ended). On cancel or end, the
// requests under way are cancelled at once (no request leaves after a
// pause), pages already fetched are stored and reported, leases not done
// are released, and the session closes.
func (r *Runner) Run(ctx context.Context, sess *session.Session) {
	fetchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	sess.Credit(r.cfg.FetcherConcurrency)
loop:
	for {
		select {
		case l, ok := <-sess.Leases():
			if !ok {
				break loop
			}
			select {
			case <-sess.Ended():
				// Leases and the end can be ready together: none starts
				// after the end.
				sess.Report(session.Outcome{LeaseID: l.ID, Released: true})
				continue
			default:
			}
			wg.Add(1)
			r.count(func(c *workflows.SessionCounters) { c.InFlight++ })
			r.m.inflight(r.cfg.ID, 1)
			go func() {
				defer wg.Done()
				o := r.handle(fetchCtx, l)
				r.count(func(c *workflows.SessionCounters) { c.InFlight-- })
				r.m.inflight(r.cfg.ID, -1)
				sess.Report(o)
				if fetchCtx.Err() == nil {
					sess.Credit(1)
				}
			}()
		case <-ctx.Done():
			break loop
		case <-sess.Ended():
			break loop
		}
	}
	cancel()
	wg.Wait()
	// Leases that arrived but were not started go back untouched.
	for {
		select {
		case l, ok := <-sess.Leases():
			if ok {
				sess.Report(session.Outcome{LeaseID: l.ID, Released: true})
				continue
			}
		default:
		}
		break
	}
	_ = sess.Close()
}

// handle fetches one lease and stores its page; the outcome says what the
// scheduler must do with the URL, and why a failure happened (Reason, and
// HostDown for one the scheduler counts against the host). Each attempt
// that reaches the fetch has its crawl log line, written before the
// outcome is reported (a stored page's once it is stored).
func (r *Runner) handle(ctx context.Context, l session.Lease) session.Outcome {
	switch l.Kind {
	case session.KindRobots:
		return r.handleRobots(ctx, l)
	case session.KindResolve:
		return r.handleResolve(ctx, l)
	}
	o := session.Outcome{LeaseID: l.ID}
	start := time.Now()
	req := fetch.Request{URL: l.URL, Depth: l.Depth, Hops: l.Hops, Embeds: l.Embeds, Parent: l.Parent, Path: l.Path, Score: l.Score, Attempt: l.Attempt, MaxAttempts: l.MaxAttempts, Prior: l.Prior}
	res := r.f.Fetch(ctx, req)
	// A spooled body is released once the sinks are done with it (or the
	// page is dropped): its file goes with it.
	defer res.Page.Release()
	fetch.ScoreLinks(req, res.Links, r.scoreLink)
	if ctx.Err() != nil {
		o.Released = true
		return o
	}
	took := time.Since(start)
	r.m.fetched(r.cfg.ID, res, took)
	if !res.Answered.IsZero() {
		// The server's response time, for an adaptive delay.
		o.Latency = res.Answered.Sub(start)
	}
	// Took is measured from when the response head arrived (or from now,
	// without a response): the scheduler spaces the host's next start from
	// (report time - Took), which must not be before this request reached
	// the server; parsing and storing the page do not count.
	done := time.Now()
	if r.digests != nil && fetch.Dedupable(res) {
		r.dedup(ctx, &res)
	}
	line := fetchLine(req, res, took)
	if res.Err != nil {
		o.Error = res.Err.Error()
	}
	o.Reason, o.HostDown, o.IP = res.Reason, res.HostDown, res.IP
	if res.Retry {
		o.Retry, o.RetryAfter, o.Status = true, res.RetryAfter, res.Status
		o.Backoff = o.Status == 429 || o.Status == 503
		r.count(func(c *workflows.SessionCounters) { c.Errors++ })
		line.Outcome = crawllog.OutcomeRetry
		r.logLine(ctx, line)
		o.Took = since(res.Answered, done)
		return o
	}
	if res.Page != nil && !r.storePage(ctx, res, &o, line) {
		o.Took = since(res.Answered, done)
		return o
	}
	o.Links = res.Links
	o.Capture, o.Unchanged = res.Capture, res.Unchanged
	if res.Page != nil {
		o.MIME = res.Page.ContentType
	}
	o.Took = since(res.Answered, done)
	return o
}

// storePage stores res.Page, writes its crawl log line (line) once it is
// stored, and fills o; false when no sink stored it, or its line could not
// be written (o then says SinkFailed: the URL is fetched again, so that no
// page is acked without its line).
func (r *Runner) storePage(ctx context.Context, res fetch.Result, o *session.Outcome, line crawllog.Line) bool {
	where, err := r.store(ctx, res.Page)
	logFailed := false
	if err == nil {
		line.Outcome, line.Stored = crawllog.OutcomePage, where
		if res.Page.Status == 0 {
			line.Outcome = crawllog.OutcomeFailed
		}
		if err = r.writeLine(line); err != nil {
			logFailed = true
		}
	}
	if err != nil {
		// The sink's (or the crawl log's) failure, not the fetch's, is
		// why the URL is not done. The links go with it: the scheduler
		// follows them when it dead-letters the URL (at once when the
		// refusal is for good).
		o.SinkFailed, o.SinkRefused = true, sink.Permanent(err)
		o.Links = res.Links
		o.Error = err.Error()
		o.Reason, o.HostDown = page.ReasonSink, false
		r.m.sinkFailed(r.cfg.ID)
		r.count(func(c *workflows.SessionCounters) { c.Errors++ })
		if logFailed {
			return false // said as the outcome's error
		}
		line.Outcome, line.Stored, line.Error, line.Reason = crawllog.OutcomeUnstored, nil, err.Error(), page.ReasonSink
		if o.SinkRefused {
			line.Annotations = append(line.Annotations, crawllog.AnnotDeadLettered)
		}
		r.logLine(ctx, line)
		return false
	}
	o.Stored, o.Status = true, res.Page.Status
	if res.Page.Err != "" {
		o.Error = res.Page.Err
	}
	if res.Page.Status == 0 {
		r.count(func(c *workflows.SessionCounters) { c.Failed++ })
	} else {
		r.count(func(c *workflows.SessionCounters) { c.Fetched++ })
	}
	return true
}

// store stores p, retrying with backoff for r.storeRetryFor while a sink is
// down, unless ctx is cancelled (pause, stop) between attempts, or the sink
// refused the page for good (sink.Permanent), which no retry changes. It
// returns where the sinks stored p (page.Page.Stored).
func (r *Runner) store(ctx context.Context, p *page.Page) ([]page.Location, error) {
	deadline := time.Now().Add(r.storeRetryFor)
	backoff := 250 * time.Millisecond
	for {
		p.Stored = &page.Locations{} // a failed attempt's locations are not the page's
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeoutFor(p))
		err := r.sk.Store(sctx, p)
		cancel()
		if err == nil {
			return p.Stored.List(), nil
		}
		if sink.Permanent(err) || time.Now().Add(backoff).After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// storeTimeoutFor bounds one Store of p: storeTimeout, plus a second per
// 8 MiB of body, since a large body is digested and compressed within
// its Store (a 300 MiB one takes seconds of a core).
func storeTimeoutFor(p *page.Page) time.Duration {
	return storeTimeout + time.Duration(p.BodySize()/(8<<20))*time.Second
}

// since is the time elapsed from answered, or from done when there was no
// response.
func since(answered, done time.Time) time.Duration {
	if answered.IsZero() {
		return time.Since(done)
	}
	return time.Since(answered)
}
