package session

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/page"
)

// Control is a control session: seeding, stats and closing campaigns.
// Safe for concurrent use (requests are serialized).
type Control struct {
	mu   sync.Mutex
	conn net.Conn
	fr   *FrameReader
	fw   *FrameWriter
	addr string
}

// DialControl opens a control session.
func (cl Client) DialControl(ctx context.Context, addr string) (*Control, error) {
	c, fr, fw, _, err := cl.handshake(ctx, addr, Hello{Role: RoleControl, Client: "control"})
	if err != nil {
		return nil, err
	}
	return &Control{conn: c, fr: fr, fw: fw, addr: addr}, nil
}

func (c *Control) do(ctx context.Context, req Request) (Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(3 * time.Minute)
	}
	_ = c.conn.SetDeadline(deadline)
	if err := c.fw.WriteFrame(FrameRequest, req); err != nil {
		return Reply{}, err
	}
	if err := c.fw.Flush(); err != nil {
		return Reply{}, fmt.Errorf("scheduler %s: %w", c.addr, err)
	}
	t, payload, err := c.fr.ReadFrame()
	if err != nil {
		return Reply{}, fmt.Errorf("scheduler %s: %w", c.addr, err)
	}
	var rep Reply
	if t != FrameReply {
		return Reply{}, fmt.Errorf("scheduler %s: unexpected %s frame: %w", c.addr, t, ErrBadFrame)
	}
	if err := Decode(t, payload, &rep); err != nil {
		return Reply{}, err
	}
	if rep.Error != "" {
		return rep, &replyError{fmt.Sprintf("scheduler %s: %s", c.addr, rep.Error)}
	}
	return rep, nil
}

// Slots asks the scheduler for starts on the clocks it owns, and reports
// starts under them (OpSlots): one wait per ask, in order.
func (c *Control) Slots(ctx context.Context, asks []SlotAsk, started []SlotStart) ([]time.Duration, error) {
	rep, err := c.do(ctx, Request{Op: OpSlots, Slots: asks, Started: started})
	if err == nil && len(rep.Waits) != len(asks) {
		err = fmt.Errorf("scheduler %s: %d waits for %d slots asked: %w", c.addr, len(rep.Waits), len(asks), ErrBadFrame)
	}
	return rep.Waits, err
}

// Digests looks payload digests up in a lineage's digest index
// (OpDigests): one capture per digest, in order, nil where none is known.
func (c *Control) Digests(ctx context.Context, lineage string, digests []string) ([]*page.Capture, error) {
	rep, err := c.do(ctx, Request{Op: OpDigests, Campaign: &campaign.Config{ID: lineage}, Digests: digests})
	if err == nil && len(rep.Captures) != len(digests) {
		err = fmt.Errorf("scheduler %s: %d captures for %d digests asked: %w", c.addr, len(rep.Captures), len(digests), ErrBadFrame)
	}
	return rep.Captures, err
}

// Seed publishes seed URLs (normalized, confirmed) for the campaign.
func (c *Control) Seed(ctx context.Context, cfg campaign.Config, urls []string) (int, error) {
	rep, err := c.do(ctx, Request{Op: OpSeed, Campaign: &cfg, URLs: urls})
	return rep.Seeded, err
}

// AddSeeds is Seed for a campaign that runs (a seed list): refused by a
// scheduler that closed it.
func (c *Control) AddSeeds(ctx context.Context, cfg campaign.Config, urls []string) (int, error) {
	rep, err := c.do(ctx, Request{Op: OpSeed, Campaign: &cfg, URLs: urls, Live: true})
	return rep.Seeded, err
}

// Check asks the scheduler whether it can run the campaign: its config is
// valid and names a priority policy the scheduler has. It creates nothing.
// A scheduler older than the check answers `unknown op "check"`.
func (c *Control) Check(ctx context.Context, cfg campaign.Config) error {
	_, err := c.do(ctx, Request{Op: OpCheck, Campaign: &cfg})
	return err
}

// Stats returns the scheduler's stats of a campaign.
func (c *Control) Stats(ctx context.Context, id string) (Stats, error) {
	rep, err := c.do(ctx, Request{Op: OpStats, Campaign: &campaign.Config{ID: id}})
	if err != nil || rep.Stats == nil {
		return Stats{Campaign: id}, err
	}
	return *rep.Stats, nil
}

// CloseCampaign ends a campaign on the scheduler for good; with del, its
// queues and this scheduler's seen marks go too. With several schedulers,
// use CloseEverywhere, which deletes only after every one let go.
func (c *Control) CloseCampaign(ctx context.Context, id string, del bool) (Stats, error) {
	return c.closeCampaign(ctx, id, true, del)
}

func (c *Control) closeCampaign(ctx context.Context, id string, final, del bool) (Stats, error) {
	rep, err := c.do(ctx, Request{Op: OpClose, Campaign: &campaign.Config{ID: id}, Final: final, Delete: del})
	if err != nil {
		return Stats{Campaign: id}, err
	}
	if rep.Stats == nil {
		return Stats{Campaign: id}, nil
	}
	return *rep.Stats, nil
}

// EndSessions ends the campaign's fetcher sessions named by keys on this
// scheduler (FrameEnd) and refuses those keys from now on; it returns how
// many of them had a session open here.
func (c *Control) EndSessions(ctx context.Context, id string, keys []string) (int, error) {
	rep, err := c.do(ctx, Request{Op: OpEnd, Campaign: &campaign.Config{ID: id}, Keys: keys})
	return rep.Ended, err
}

// Failures lists the campaign's failure records on this scheduler (reason
// "" for all) and how many there are.
func (c *Control) Failures(ctx context.Context, id, reason string) ([]failure.Record, int, error) {
	rep, err := c.do(ctx, Request{Op: OpFailures, Campaign: &campaign.Config{ID: id}, Reason: reason})
	return rep.Failures, rep.FailuresTotal, err
}

// Close ends the control session.
func (c *Control) Close() error { return c.conn.Close() }
