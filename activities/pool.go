package activities

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
)

// fetchers shares one fetch.Fetcher, and so one connection pool, among the
// FetchSessions of a campaign in this process.
//
// With a pool per session, every fetcher of a worker kept its own
// keep-alive connections to every host it had been leased: 64 fetchers on
// a web of 1,000 hosts held over 4,000 sockets per worker process, and the
// workers' RSS grew with them through the crawl (`make load`). The
// scheduler leases a host's URLs to any fetcher, so one pool per process
// serves them all and holds a host's connections once.
var fetchers = newPool[*fetch.Fetcher]()

// sinks shares the sinks of a campaign among its FetchSessions in this
// process, as fetchers does the Fetcher: one Kafka writer (whose batches
// then gather the pages of every session instead of a few of one: fewer
// produce requests, and fewer fsyncs on a broker that syncs each batch),
// one WARC file and its group commit, one PostgreSQL pool.
var sinks = newPool[sink.Sink]()

// knownLinks shares a campaign's session.KnownLinks among its
// FetchSessions in this process: the links one session's scheduler
// recorded are left out of every session's outcomes. It is keyed by the
// campaign and its workflow run, so that a campaign deleted and started
// again under its ID (its frontier and seen marks gone) never inherits
// the links its earlier run had queued.
var knownLinks = newPool[*session.KnownLinks]()

// acquireKnownLinks returns the KnownLinks of the campaign's run and the
// function that gives it back.
func acquireKnownLinks(ctx context.Context, id, runID string) (*session.KnownLinks, func() error, error) {
	return knownLinks.acquire(ctx, id+"\x00"+runID, nil, func() (*session.KnownLinks, func() error, error) {
		return session.NewKnownLinks(0), func() error { return nil }, nil
	})
}

// sinkOpenTimeout bounds opening a campaign's sinks for the sessions that
// share them: the open runs on its own context (no session's cancel ends
// it for the others), and a service that accepts a connection and never
// answers cannot hold them all for longer.
const sinkOpenTimeout = 30 * time.Second

// acquireFetcher returns the campaign's shared Fetcher and the function
// that gives it back; lookup, when set, answers its host names
// (fetch.WithLookup). The sessions of one campaign share it whatever live
// rules their configs carry: its scope takes the newest it is given
// (urlrule.Scope.TakeRules).
func acquireFetcher(ctx context.Context, cfg campaign.Config, lookup fetch.LookupFunc) (*fetch.Fetcher, func() error, error) {
	made := cfg
	made.Live = campaign.Rules{}
	f, release, err := fetchers.acquire(ctx, cfg.ID, made, func() (*fetch.Fetcher, func() error, error) {
		var opts []fetch.Option
		if lookup != nil {
			opts = append(opts, fetch.WithLookup(lookup))
		}
		f, err := fetch.New(cfg, opts...)
		if err != nil {
			return nil, nil, err
		}
		return f, func() error { f.Close(); return nil }, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if _, err := f.Scope().TakeRules(cfg.Live); err != nil {
		_ = release()
		return nil, nil, err
	}
	return f, release, nil
}

// sinksMade is what a campaign's shared sinks are opened with; a session
// whose differs gets sinks of its own.
type sinksMade struct {
	Sinks   []string
	BodyCap int64
	Opts    sink.Options
}

// acquireSinks returns the campaign's shared sinks (sink.OpenAll of
// cfg.Sinks with opts) and the function that gives them back; the last
// session to give them back closes them, and that function returns the
// close's error.
func acquireSinks(ctx context.Context, cfg campaign.Config, opts sink.Options) (sink.Sink, func() error, error) {
	return sinks.acquire(ctx, cfg.ID, sinksMade{cfg.Sinks, cfg.BodyCap, opts}, func() (sink.Sink, func() error, error) {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sinkOpenTimeout)
		defer cancel()
		sk, err := sink.OpenAll(octx, cfg.Sinks, opts)
		if err != nil {
			return nil, nil, err
		}
		return sk, sk.Close, nil
	})
}

// pool hands out one value per campaign to the FetchSessions of this
// process: made on first use, closed when the last session gives it back.
type pool[V any] struct {
	mu sync.Mutex
	m  map[string]*pooled[V] // by campaign ID
}

type pooled[V any] struct {
	made  any           // what v was made with
	ready chan struct{} // closed once v (or err) is set
	v     V
	err   error
	close func() error
	refs  int
}

func newPool[V any]() *pool[V] { return &pool[V]{m: map[string]*pooled[V]{}} }

// errOpenPanicked is what the sessions waiting on an open get when it
// panicked (the panic itself goes on, to the session that opened).
var errOpenPanicked = errors.New("opening a shared value panicked")

// acquire returns the value shared under key, made by open on first use,
// and the function that gives it back (it returns the close's error when
// it was the last). A session whose made differs (reflect.DeepEqual) from
// what the shared value was made with (a campaign started again under the
// same ID with other settings) gets a value of its own. open runs outside
// the pool's lock (a sink may take seconds to connect): the sessions that
// ask meanwhile wait for it, or for their ctx, and share its error when it
// fails; a failed value is not kept.
func (p *pool[V]) acquire(ctx context.Context, key string, made any, open func() (V, func() error, error)) (V, func() error, error) {
	var zero V
	p.mu.Lock()
	e, shared := p.m[key]
	if shared && !reflect.DeepEqual(e.made, made) {
		p.mu.Unlock()
		return open()
	}
	if shared {
		e.refs++
		p.mu.Unlock()
		select {
		case <-e.ready: // made already: no wait to give up
		default:
			select {
			case <-e.ready:
			case <-ctx.Done():
				p.release(key, e)
				return zero, nil, ctx.Err()
			}
		}
		if e.err != nil {
			p.release(key, e)
			return zero, nil, e.err
		}
		return e.v, func() error { return p.release(key, e) }, nil
	}
	e = &pooled[V]{made: made, ready: make(chan struct{}), refs: 1}
	p.m[key] = e
	p.mu.Unlock()

	p.open(key, e, open)
	if e.err != nil {
		p.release(key, e)
		return zero, nil, e.err
	}
	return e.v, func() error { return p.release(key, e) }, nil
}

// open makes e's value and closes e.ready, also when open panics (the
// waiters then get errOpenPanicked, and the panic goes on); a failed
// value leaves the pool.
func (p *pool[V]) open(key string, e *pooled[V], open func() (V, func() error, error)) {
	done := false
	defer func() {
		if !done {
			e.err = errOpenPanicked
		}
		if e.err != nil {
			p.mu.Lock()
			if p.m[key] == e {
				delete(p.m, key)
			}
			p.mu.Unlock()
		}
		close(e.ready)
	}()
	e.v, e.close, e.err = open()
	done = true
}

// release gives e back; the last one closes its value and returns the
// close's error.
func (p *pool[V]) release(key string, e *pooled[V]) error {
	p.mu.Lock()
	e.refs--
	last := e.refs == 0
	if last && p.m[key] == e {
		delete(p.m, key)
	}
	p.mu.Unlock()
	if last && e.close != nil {
		return e.close()
	}
	return nil
}
