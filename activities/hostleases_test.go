package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
)

// A robots.txt lease reports the server's response time as a page's
// does: a slow robots.txt sets the host's adaptive delay (delay_factor)
// before its first page, and again on a scheduler that lost the delay.
func TestRobotsReportsItsLatency(t *testing.T) {
	const slow = 150 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(slow)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	cfg := campaign.Config{ID: "robots", Seeds: []string{srv.URL + "/"}, AllowPrivate: true, Sinks: []string{"warc:/unused"}}.WithDefaults()
	require.NoError(t, cfg.Validate())
	f, err := fetch.New(cfg)
	require.NoError(t, err)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := NewRunner(cfg, f, sink.NewMemory(), 0, "test").handle(ctx, session.Lease{ID: 1, Kind: session.KindRobots, URL: srv.URL})
	require.NotNil(t, o.Robots)
	assert.Equal(t, 404, o.Robots.Status)
	assert.GreaterOrEqual(t, o.Latency, slow)
}
