package activities

import (
	"context"
	"errors"
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
