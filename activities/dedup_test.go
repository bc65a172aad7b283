package activities

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
)

// A digest lookup that fails (the scheduler unreachable) says so, and the
// lookups of the next digestRestFor fail at once without dialling again:
// their pages are stored in full, and a scheduler down costs one dial
// per rest, not one per page.
func TestDigestLookupFailureRests(t *testing.T) {
	var dials atomic.Int32
	down := errors.New("scheduler down")
	d := newDigestAsker(func(context.Context) (*session.Control, error) {
		dials.Add(1)
		return nil, down
	}, "lineage")
	defer d.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := d.lookup(ctx, "sha1:AAAA")
	assert.ErrorIs(t, err, down)
	for range 5 {
		_, err = d.lookup(ctx, "sha1:BBBB")
		assert.ErrorIs(t, err, errDigestsResting)
	}
	assert.Equal(t, int32(1), dials.Load())

	// A failed lookup leaves the page whole.
	r := &Runner{digests: d}
	pg := &page.Page{URL: "http://h.example/", Status: 200, Body: []byte("body")}
	res := fetch.Result{Page: pg, Capture: &page.Capture{Status: 200, Digest: page.PayloadDigest(pg.Body)}}
	require.True(t, fetch.Dedupable(res))
	r.dedup(ctx, &res)
	assert.Equal(t, "body", string(res.Page.Body))
	assert.Nil(t, res.Page.Revisit)
	assert.Equal(t, "", res.Unchanged)
}

// A closed asker answers at once.
func TestDigestAskerClosed(t *testing.T) {
	d := newDigestAsker(func(context.Context) (*session.Control, error) { return nil, errors.New("never asked") }, "lineage")
	d.close()
	_, err := d.lookup(context.Background(), "sha1:AAAA")
	assert.ErrorIs(t, err, errAskerClosed)
}

// digestScheduler is a scheduler's control side reduced to op digests:
// it knows one digest, and ends each session after one request, as a
// scheduler ends a control session left idle for its read deadline.
func digestScheduler(t *testing.T, known string) (addr string, sessions *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	sessions = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sessions.Add(1)
			go func() {
				defer c.Close()
				fr, fw := session.NewFrameReader(c), session.NewFrameWriter(c)
				if _, _, err := fr.ReadFrame(); err != nil {
					return
				}
				_ = fw.WriteFrame(session.FrameWelcome, session.Welcome{Version: session.ProtocolVersion})
				_ = fw.Flush()
				ft, payload, err := fr.ReadFrame()
				if err != nil {
					return
				}
				var req session.Request
				_ = session.Decode(ft, payload, &req)
				cs := make([]*page.Capture, len(req.Digests))
				for i, d := range req.Digests {
					if d == known {
						cs[i] = &page.Capture{Status: 200, Digest: d, URI: "http://h.example/first"}
					}
				}
				_ = fw.WriteFrame(session.FrameReply, session.Reply{Captures: cs})
				_ = fw.Flush()
			}()
		}
	}()
	return ln.Addr().String(), sessions
}

// A control session the scheduler ended while idle (a continuous
// campaign fetches seldom) is dialled again for the lookup, which
// succeeds: an idle session is no failure, and no page is stored in full
// for it.
func TestDigestLookupRedialsAnEndedSession(t *testing.T) {
	addr, sessions := digestScheduler(t, "sha1:HIT")
	cl := session.Client{Token: "t"}
	d := newDigestAsker(func(ctx context.Context) (*session.Control, error) { return cl.DialControl(ctx, addr) }, "lineage")
	defer d.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, digest := range []string{"sha1:HIT", "sha1:MISS", "sha1:HIT"} {
		c, err := d.lookup(ctx, digest)
		require.NoError(t, err, "lookup %d", i)
		assert.Equal(t, digest == "sha1:HIT", c != nil, "lookup %d of %s: %+v", i, digest, c)
	}
	assert.Equal(t, int32(3), sessions.Load(), "a session per lookup, each ended by the scheduler")
}
