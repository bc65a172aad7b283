package activities

import (
	"reflect"
	"sync"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
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
var fetchers = fetcherPool{m: map[string]*pooledFetcher{}}

type fetcherPool struct {
	mu sync.Mutex
	m  map[string]*pooledFetcher // by campaign ID
}

type pooledFetcher struct {
	cfg  campaign.Config
	f    *fetch.Fetcher
	refs int
}

// acquire returns the campaign's Fetcher, made with cfg on first use, and
// the function that gives it back. A session whose cfg differs from the one
// the shared Fetcher was made with (a campaign started again under the same
// ID with other settings) gets a Fetcher of its own.
func (p *fetcherPool) acquire(cfg campaign.Config) (*fetch.Fetcher, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, shared := p.m[cfg.ID]
	if shared && reflect.DeepEqual(e.cfg, cfg) {
		e.refs++
		return e.f, func() { p.release(cfg.ID, e) }, nil
	}
	f, err := fetch.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	if shared {
		return f, f.Close, nil
	}
	e = &pooledFetcher{cfg: cfg, f: f, refs: 1}
	p.m[cfg.ID] = e
	return f, func() { p.release(cfg.ID, e) }, nil
}

func (p *fetcherPool) release(id string, e *pooledFetcher) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.refs--; e.refs > 0 {
		return
	}
	if p.m[id] == e {
		delete(p.m, id)
	}
	e.f.Close()
}
