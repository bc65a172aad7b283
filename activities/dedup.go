package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
)

// Deduplication by payload (campaign.Config.Dedup): before a page is
// stored in full, its payload digest is looked up in the digest index of
// the scheduler that leased it; a payload some URL of the lineage already
// stored is stored as a revisit of that capture instead. A lookup that
// fails or times out stores the page in full: it costs bytes, never a page.

// digestAskTimeout bounds one lookup, the dial included; after a lookup
// failed, the next digestRestFor of lookups fail at once without asking
// (a scheduler down, or one too old to know OpDigests, costs one ask per
// rest, not one per page).
const (
	digestAskTimeout = 5 * time.Second
	digestRestFor    = 10 * time.Second
)

var (
	// errAskerClosed: the session's asker is closed (its session ended).
	errAskerClosed = errors.New("digest lookups closed with the session")
	// errDigestsResting: a lookup failed less than digestRestFor ago.
	errDigestsResting = errors.New("digest lookups resting after a failure")
)

// digestAsker looks payload digests up on one scheduler (session.OpDigests)
// over a control session of its own. The asks of the fetches under way go
// in one request: while one is out, those that come wait, and go together.
type digestAsker struct {
	dial    func(context.Context) (*session.Control, error)
	lineage string
	asks    chan digestAsk
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type digestAsk struct {
	digest string
	reply  chan digestAnswer // buffered: the loop never waits on it
}

type digestAnswer struct {
	capture *page.Capture
	err     error
}

// newDigestAsker starts an asker of lineage's index on the scheduler dial
// reaches; close stops it.
func newDigestAsker(dial func(context.Context) (*session.Control, error), lineage string) *digestAsker {
	ctx, cancel := context.WithCancel(context.Background())
	d := &digestAsker{
		dial:    dial,
		lineage: lineage,
		asks:    make(chan digestAsk),
		ctx:     ctx,
		cancel:  cancel,
	}
	d.wg.Add(1)
	go d.loop()
	return d
}

func (d *digestAsker) close() {
	d.cancel()
	d.wg.Wait()
}

// lookup returns the capture that stored digest's payload in full, nil
// when none is known.
func (d *digestAsker) lookup(ctx context.Context, digest string) (*page.Capture, error) {
	a := digestAsk{digest: digest, reply: make(chan digestAnswer, 1)}
	select {
	case d.asks <- a:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.ctx.Done():
		return nil, errAskerClosed
	}
	select {
	case ans := <-a.reply:
		return ans.capture, ans.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *digestAsker) loop() {
	defer d.wg.Done()
	var ctl *session.Control
	var rest time.Time
	defer func() {
		if ctl != nil {
			_ = ctl.Close()
		}
	}()
	for {
		var batch []digestAsk
		select {
		case a := <-d.asks:
			batch = append(batch, a)
		case <-d.ctx.Done():
			return
		}
	more:
		for len(batch) < session.MaxDigestsAsked {
			select {
			case a := <-d.asks:
				batch = append(batch, a)
			default:
				break more
			}
		}
		digests := make([]string, len(batch))
		for i, a := range batch {
			digests[i] = a.digest
		}
		var cs []*page.Capture
		err := errDigestsResting
		if time.Now().After(rest) {
			if cs, err = d.ask(&ctl, digests); err != nil {
				rest = time.Now().Add(digestRestFor)
			}
		}
		for i, a := range batch {
			if err != nil {
				a.reply <- digestAnswer{err: err}
			} else {
				a.reply <- digestAnswer{capture: cs[i]}
			}
		}
	}
}

// ask sends one request on *ctl, dialled first when nil. A control
// session that failed is closed; one that had served before is dialled
// again once at once, since the scheduler ends a session left idle (5
// minutes without a request, as a continuous campaign's lookups may be).
func (d *digestAsker) ask(ctl **session.Control, digests []string) ([]*page.Capture, error) {
	ctx, cancel := context.WithTimeout(d.ctx, digestAskTimeout)
	defer cancel()
	for reused := *ctl != nil; ; reused = false {
		if *ctl == nil {
			c, err := d.dial(ctx)
			if err != nil {
				return nil, err
			}
			*ctl = c
		}
		cs, err := (*ctl).Digests(ctx, d.lineage, digests)
		if err == nil {
			return cs, nil
		}
		_ = (*ctl).Close()
		*ctl = nil
		if !reused || ctx.Err() != nil {
			return nil, err
		}
	}
}

// dedup makes res a revisit of the capture that stored its payload, when
// the lineage's index knows one; otherwise res stays a full page.
func (r *Runner) dedup(ctx context.Context, res *fetch.Result) {
	ref, err := r.digests.lookup(ctx, res.Capture.Digest)
	switch {
	case err != nil:
		r.m.dedupLookup(r.cfg.ID, "error")
	case ref == nil:
		r.m.dedupLookup(r.cfg.ID, "miss")
	default:
		r.m.dedupLookup(r.cfg.ID, "hit")
		fetch.SameAs(res, *ref)
	}
}
