// Package sessiontest runs fetchers' sessions for tests: the reconnect
// loop that a test fleet needs, without the Temporal activity around it.
package sessiontest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
)

// redialAfter is how long a fetcher waits before it dials again after a
// failed dial: a scheduler under test is on loopback, up or restarting.
const redialAfter = 100 * time.Millisecond

// Fleet runs fetchers until it is stopped, at the latest when the test
// ends.
type Fleet struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	known map[string]*session.KnownLinks // by campaign, shared as a worker process shares it
}

// NewFleet returns an empty fleet that stops when the test ends.
func NewFleet(t testing.TB) *Fleet {
	ctx, cancel := context.WithCancel(context.Background())
	fl := &Fleet{ctx: ctx, cancel: cancel, known: map[string]*session.KnownLinks{}}
	t.Cleanup(fl.Stop)
	return fl
}

// Go runs fetcher i of cfg (client name fetcher-i, the session's buffer
// cfg.FetcherConcurrency, the dev token): it dials addrs in turn, starting
// at addrs[i%len(addrs)], and hands each session to run until run returns;
// a failed dial is tried again after redialAfter. The fleet's fetchers of
// a campaign share its KnownLinks, as a worker's FetchSessions do. When
// the fleet stops it lets run return, then calls done.
func (fl *Fleet) Go(i int, addrs []string, cfg campaign.Config, run func(context.Context, *session.Session), done func()) {
	cl := session.Client{Token: session.DevToken, Known: fl.Known(cfg.ID)}
	fl.wg.Add(1)
	go func() {
		defer fl.wg.Done()
		defer done()
		for attempt := 0; fl.ctx.Err() == nil; attempt++ {
			sess, err := cl.DialSession(fl.ctx, addrs[(i+attempt)%len(addrs)], fmt.Sprintf("fetcher-%d", i), cfg, cfg.FetcherConcurrency)
			if err != nil {
				select {
				case <-fl.ctx.Done():
				case <-time.After(redialAfter):
				}
				continue
			}
			run(fl.ctx, sess)
		}
	}()
}

// Known is the KnownLinks the fleet's fetchers of campaign id share.
func (fl *Fleet) Known(id string) *session.KnownLinks {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	k := fl.known[id]
	if k == nil {
		k = session.NewKnownLinks(0)
		fl.known[id] = k
	}
	return k
}

// Stop stops every fetcher and waits until each has returned.
func (fl *Fleet) Stop() { fl.cancel(); fl.wg.Wait() }
