package frontier

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// holdWindow bounds how far ahead the scheduler holds a host's URLs: a URL
// whose turn is further away is parked (re-published to a parking queue,
// confirmed, then acked), so no delivery stays unacked anywhere near
// RabbitMQ's consumer_timeout and no host fills its shard's prefetch window.
const holdWindow = 30 * time.Second

// maxLost: a URL whose lease was lost this many times (its fetcher died or
// never reported) is a poison URL and goes to the dead-letter queue.
const maxLost = 3

// lease is a URL handed to a session.
type lease struct {
	id uint64
	e  *entry // nil for a robots or a resolve lease
	// resolve: a resolve lease (session.KindResolve), no request.
	resolve bool
	// key: the politeness key the lease counts against (keyconc.go), ""
	// for a resolve lease, which makes no request.
	key      string
	h        *host
	s        *fetcherSession
	deadline time.Time
	start    time.Time
}

// campaignActor owns one campaign on one scheduler. Its state is touched
// only by its loop goroutine; everything else posts closures to it.
type campaignActor struct {
	srv    *Server
	cfg    campaign.Config
	topo   Topology
	policy Policy
	scope  *urlrule.Scope // for the sitemaps a robots.txt names
	log    *slog.Logger
	// key names the campaign's run in the frontier (Config.FrontierKey):
	// its queues, seen marks and failure records.
	key string
	// lineage names its fetch history (Config.HistoryKey). Like key, it
	// never changes, so the record goroutines read it; cfg is the loop's
	// (live rules replace it).
	lineage string
	// clockKey is the campaign's Config.ClockKey, bound to the config the
	// actor was made with (the key never changes; cfg is the loop's), for
	// the record goroutines: a host's politeness key, and its shard's.
	clockKey func(host string) string
	// deadLog writes the crawl log's lines of the URLs dead-lettered here
	// (nil: the campaign keeps no crawl log).
	deadLog *deadLog
	// incarnation names this actor's life (Welcome.Incarnation): what a
	// fetcher learnt of its records (session.KnownLinks) holds for it only.
	incarnation uint64

	// parked: this turn's plain parks, published by flushParks.
	parked []parkReq

	events chan func()
	done   chan struct{}
	// stopped is set by the closure that closes done: the loop runs nothing
	// after it, even what was already queued.
	stopped bool
	// stopping: the campaign is closing here; no new session, no lease, no
	// new goroutine.
	stopping bool
	// ctx ends the actor's goroutines (record, repost, sitemaps) when stop
	// gives up waiting for them; wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	hosts map[string]*host
	// forgotten: the hosts dropped while idle (hostidle.go), with the
	// pages fetched of each; forgetAt: when the next sweep is due.
	forgotten map[string]int64
	forgetAt  time.Time
	// keyWaiting holds the hosts waiting for a place under their
	// politeness key, by key (keyconc.go).
	keyWaiting map[string]map[*host]struct{}
	// keyAsks: the asks in flight to the owners of IP keys, by key, and
	// askSeq their last number (ipkey.go).
	keyAsks map[string]*keyAsk
	askSeq  uint64
	ready   hostHeap
	waiting hostHeap
	// turns numbers the hosts' turns as they begin (leaser.takeTurn).
	turns    uint64
	sessions map[*fetcherSession]struct{}
	leases   map[uint64]*lease
	held     map[seen.Key]*entry // URLs held in memory or leased, by key
	seq      uint64
	timer    *time.Timer
	timerAt  time.Time

	// consumeState: whether and on which channel the actor consumes
	// (consume.go).
	consumeState
	// parks: the park messages not back yet (parkowed.go), for park
	// queues that dead-letter (legacyParks).
	parks       *parkOwed
	legacyParks bool
	// mover: the park mover while the actor consumes; lastMover the one
	// stop waits for (parkmove.go).
	mover, lastMover *parkMover
	// vanished: shard queues found gone from RabbitMQ (vanished.go).
	vanished vanishedShards

	// publishing holds the links being published (not yet marked queued),
	// shared by the record goroutines: another record that finds one of its
	// links there waits for that publish's outcome before it acks its own
	// page.
	publishingMu sync.Mutex
	publishing   map[seen.Key]*linkPublish
	idleSince    time.Time

	// recQueue holds the record jobs waiting for a record goroutine while
	// maxRecording are running (queueRecord); recording counts those
	// running. Actor goroutine only.
	recQueue  []recordJob
	recording int
	// recBacklog weighs the record jobs queued and being recorded (each
	// one plus its links: recordWeight); over ServerConfig.RecordBacklog
	// no lease is granted (dispatch). Atomic for the metrics.
	recBacklog atomic.Int64

	// counters (atomic: Stats reads them from the request goroutine too).
	// unacked counts URLs received and not yet settled (acked, nacked, or
	// void because their channel closed), and messages not yet read.
	unacked, acked, pending atomic.Int64
	// parkMoves: the park mover's counts (parkmove.go).
	parkMoves                                                  parkMoves
	fetched, failed, retried, disallowed, duplicates, deadLtrd atomic.Int64
	// unchanged: pages recorded as revisits of their last capture (fetch
	// history), counted in fetched too.
	unchanged                                    atomic.Int64
	skipped, discovered, published, recordFailed atomic.Int64
	robotsDropped, ackFailed, messages           atomic.Int64
	clockWaits                                   atomic.Int64
	// remoteAsks: starts asked of another scheduler's clock (ipkey.go).
	remoteAsks                               atomic.Int64
	inflight                                 atomic.Int64
	nhosts, nforgotten, nsessions, hostsDown atomic.Int64
	capped                                   atomic.Bool
	// live: the campaign's live rules (rules.go), read by the record
	// goroutines too; replaced whole, by the actor.
	live atomic.Pointer[liveRules]

	// failReasons: the failures by reason (failures.go).
	failReasons

	// revisit: the campaign's revisit rules and schedule counts
	// (revisit.go).
	revisit revisitSchedule
}

func newCampaignActor(srv *Server, cfg campaign.Config) (*campaignActor, error) {
	p, err := srv.cfg.policy(cfg.Priority)
	if err != nil {
		return nil, err
	}
	scope, err := urlrule.NewScope(cfg)
	if err != nil {
		return nil, err
	}
	live, err := compileRules(cfg.Live)
	if err != nil {
		return nil, err
	}
	revisits, err := campaign.CompileRevisits(cfg.Revisit)
	if err != nil {
		return nil, err
	}
	a := &campaignActor{
		incarnation: rand.Uint64() | 1, // never 0, which a fetcher reads as none
		scope:       scope,
		srv:         srv,
		cfg:         cfg,
		key:         cfg.FrontierKey(),
		lineage:     cfg.HistoryKey(),
		clockKey:    cfg.ClockKey,
		topo:        Topology{Campaign: cfg.FrontierKey()},
		parks:       newParkOwed(),
		policy:      p,
		log:         srv.log.With("campaign", cfg.FrontierKey()),
		events:      make(chan func(), 1024),
		done:        make(chan struct{}),
		hosts:       map[string]*host{},
		forgotten:   map[string]int64{},
		keyWaiting:  map[string]map[*host]struct{}{},
		keyAsks:     map[string]*keyAsk{},
		ready:       hostHeap{ready: true},
		sessions:    map[*fetcherSession]struct{}{},
		leases:      map[uint64]*lease{},
		held:        map[seen.Key]*entry{},
		publishing:  map[seen.Key]*linkPublish{},
		timer:       time.NewTimer(time.Hour),
	}
	a.live.Store(&live)
	a.revisit.rules, a.revisit.stop = revisits, make(chan struct{})
	a.deadLog = newDeadLog(cfg.CrawlLog, a.key, srv.cfg.Name, a.log)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	srv.m().open(cfg.ID)
	if revisits != nil {
		a.spawn(a.releaser().releaseDue)
	}
	go a.loop()
	return a, nil
}

// post queues f to run on the actor's goroutine; false when the actor has
// ended. Once it has, post says so every time; f queued just before the end
// may still not run, so a caller that waits for f uses call.
func (a *campaignActor) post(f func()) bool {
	select {
	case <-a.done:
		return false
	default:
	}
	select {
	case a.events <- f:
		return true
	case <-a.done:
		return false
	}
}

// call runs f on the actor's goroutine and waits for it; false when the
// actor ended without running it.
func (a *campaignActor) call(f func()) bool {
	ran := make(chan struct{})
	if !a.post(func() { f(); close(ran) }) {
		return false
	}
	select {
	case <-ran:
		return true
	case <-a.done:
		select {
		case <-ran:
			return true
		default:
			return false
		}
	}
}

// spawn runs f in a goroutine that stop waits for; only the actor's
// goroutine spawns, and not once the actor is stopping (the work is then
// left undone: its delivery goes back to its queue with the channel).
func (a *campaignActor) spawn(f func(ctx context.Context)) bool {
	if a.stopping {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f(a.ctx)
	}()
	return true
}

func (a *campaignActor) loop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case f := <-a.events:
			f()
			// Take whatever else is waiting before leasing: leases then go
			// out in batches.
			for n := 0; n < 256 && !a.stopped; n++ {
				select {
				case f := <-a.events:
					f()
					continue
				default:
				}
				break
			}
		case <-a.timer.C:
			a.timerAt = time.Time{}
		case <-tick.C:
			a.leaser().expireLeases()
			a.consumer().releaseIfIdle()
			a.consumer().resubscribeIfDue()
			a.forgetIdleHosts(time.Now())
		case <-a.done:
			return
		}
		if a.stopped {
			return // the parks not flushed go back with the channel
		}
		if a.consuming {
			a.leaser().dispatch()
		}
		a.settler().flushParks()
	}
}

// --- stats and close ---------------------------------------------------

func (a *campaignActor) stats() session.Stats {
	s := session.Stats{
		Campaign:       a.cfg.ID,
		Held:           a.unacked.Load(),
		InFlight:       a.inflight.Load(),
		Pending:        a.pending.Load(),
		Fetched:        a.fetched.Load(),
		Unchanged:      a.unchanged.Load(),
		Failed:         a.failed.Load(),
		Retried:        a.retried.Load(),
		Disallowed:     a.disallowed.Load(),
		Duplicates:     a.duplicates.Load(),
		DeadLettered:   a.deadLtrd.Load(),
		Skipped:        a.skipped.Load(),
		Discovered:     a.discovered.Load(),
		Published:      a.published.Load(),
		Messages:       a.messages.Load(),
		Acked:          a.acked.Load(),
		Hosts:          a.nhosts.Load(),
		HostsForgotten: a.nforgotten.Load(),
		Sessions:       a.nsessions.Load(),
		CapReached:     a.capped.Load(),
		RecordFailed:   a.recordFailed.Load(),
		AckFailed:      a.ackFailed.Load(),
		HostsDown:      a.hostsDown.Load(),
		RobotsDropped:  a.robotsDropped.Load(),
		SlotAsks:       a.remoteAsks.Load(),
		Consuming:      a.isConsuming.Load(),
		FailedBy:       a.reasonCounts(),
		ConsumeError:   a.consumeErrText(),
		Vanished:       a.vanished.list(),
		ParkedOwed:     a.parks.stillOwed(a.log),
		ParkedMoving:   a.parkMoves.moving.Load(),
	}
	a.revisit.stats(&s)
	return s
}

// stop ends the actor: its sessions close and their leases go back, the
// goroutines recording outcomes finish (within grace, then they are
// cancelled, which nacks what they held), and then its deliveries go back
// to their queues. After stop nothing of the actor writes to RabbitMQ or
// to the seen store.
func (a *campaignActor) stop(grace time.Duration) {
	a.call(func() {
		if !a.stopping {
			close(a.revisit.stop)
		}
		a.stopping = true
		for s := range a.sessions {
			a.leaser().removeSession(s)
			s.close()
		}
	})
	if !waitGroupTimeout(&a.wg, grace) {
		a.log.Warn("outcomes still being recorded at close; cancelling them (their URLs go back to their queues)", "after", grace)
		a.cancel()
		if !waitGroupTimeout(&a.wg, time.Minute) {
			a.log.Error("outcome recording did not end a minute after its cancel")
		}
	}
	var mover *parkMover
	a.call(func() {
		a.consumer().release()
		a.keyLine().leave()
		a.stopped = true
		mover = a.lastMover // before done closes: call may return then
		close(a.done)
	})
	a.cancel()
	if mover != nil {
		select {
		case <-mover.done:
		case <-time.After(moveTimeout + 5*time.Second):
			a.log.Error("the park mover did not end after its cancel")
		}
	}
	a.deadLog.close()
}

// waitGroupTimeout waits for wg for at most d; false when it timed out.
func waitGroupTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
