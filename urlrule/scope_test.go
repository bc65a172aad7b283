package urlrule

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
)

func mustScope(t testing.TB, cfg campaign.Config) *Scope {
	t.Helper()
	s, err := NewScope(cfg.WithDefaults())
	require.True(t, err == nil, err)
	return s
}

func allow(s *Scope, raw string, depth int) (bool, string) {
	u, err := url.Parse(raw)
	if err != nil {
		return false, err.Error()
	}
	return s.Allow(u, depth, nil)
}

func TestScopeRules(t *testing.T) {
	seeds := mustScope(t, campaign.Config{
		Seeds:    []string{"http://Example.com:8080/start", "https://bücher.example/"},
		Exclude:  []string{`/private/`, `\.pdf$`},
		MaxDepth: new(3),
	})
	regex := mustScope(t, campaign.Config{
		Seeds: []string{"http://example.com/"},
		Scope: []string{`^https?://([a-z]+\.)?example\.org/`},
	})
	seedsOnly := mustScope(t, campaign.Config{Seeds: []string{"http://example.com/"}, MaxDepth: new(0)})
	cases := []struct {
		s      *Scope
		url    string
		depth  int
		reason string // "" when allowed
	}{
		{seeds, "http://example.com/a", 1, ""},
		{seeds, "https://example.com:9999/a", 1, ""}, // host, not port, is the key
		{seeds, "http://xn--bcher-kva.example/x", 1, ""},
		{seeds, "http://www.example.com/a", 1, ReasonOutOfScope},
		{seeds, "http://example.com/a", 3, ""},
		{seeds, "http://example.com/a", 4, ReasonDepth},
		{seeds, "http://example.com/private/x", 1, ReasonExcluded},
		{seeds, "http://example.com/doc.pdf", 1, ReasonExcluded},
		{seeds, "ftp://example.com/a", 1, ReasonScheme},
		{seeds, "http://example.com/" + strings.Repeat("a", 2100), 1, ReasonTooLong},
		{seeds, "http://example.com/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/20", 1, ""},
		{seeds, "http://example.com/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/20/21", 1, ReasonSegments},
		{seeds, "http://example.com/x/x/x", 1, ReasonRepeats},
		{seeds, "http://example.com/a/b/a/b/a/b", 1, ReasonRepeats},
		{seeds, "http://example.com/p/img/p/img/p/img/x.png", 1, ReasonRepeats},
		{seeds, "http://example.com/a/b/a/b", 1, ""},
		{seeds, "http://example.com////", 1, ""}, // empty segments are not counted
		{regex, "http://example.org/x", 1, ""},
		{regex, "https://www.example.org/x", 1, ""},
		{regex, "http://example.com/x", 1, ReasonOutOfScope}, // regexes replace the seed hosts
		{regex, "http://example.com/x", 1000, ReasonOutOfScope},
		{regex, "http://example.org/x", 1000, ""}, // no depth limit
		{seedsOnly, "http://example.com/", 0, ""}, // max_depth 0: the seeds only
		{seedsOnly, "http://example.com/a", 1, ReasonDepth},
	}
	for _, c := range cases {
		ok, reason := allow(c.s, c.url, c.depth)
		assert.Equal(t, c.reason, reason, c.url[:min(60, len(c.url))])
		assert.Equal(t, c.reason == "", ok, c.url[:min(60, len(c.url))])
	}
}

func TestScopeGeneratedSpace(t *testing.T) {
	s := mustScope(t, campaign.Config{Seeds: []string{"http://example.com/"}})
	month := func(i int) *url.URL {
		u, _ := url.Parse(fmt.Sprintf("http://example.com/calendar/%d/%02d", 2026+i/12, i%12+1))
		return u
	}
	// A calendar whose every month links to the next: the chain of one
	// pattern ends at MaxPatternDepth.
	fetched := 0
	for i := 1; ; i++ {
		ok, reason := s.Allow(month(i), i+1, month(i-1))
		if !ok {
			assert.Equal(t, ReasonGenerated, reason)
			break
		}
		fetched++
		require.True(t, fetched < 10*MaxPatternDepth, "the calendar chain never ended")
	}
	assert.Equal(t, MaxPatternDepth-1, fetched)
	// Numbered pages at shallow depth pass however many there are, and a
	// deep link of another pattern than its page passes.
	root, _ := url.Parse("http://example.com/")
	for i := range 5000 {
		u, _ := url.Parse(fmt.Sprintf("http://example.com/p/%d.html", i))
		ok, _ := s.Allow(u, 12, root)
		require.True(t, ok)
	}
	ok, _ := s.Allow(month(500), MaxPatternDepth+50, root)
	assert.True(t, ok, "a link from a page of another pattern passes")
}

func TestUrlPattern(t *testing.T) {
	u, _ := url.Parse("http://h1.example/cal/2024/05/x7y?d=12&e=abc")
	assert.Equal(t, "h1.example/cal/N/N/xNy?d=N&e=abc", urlPattern(u))
	u, _ = url.Parse("http://h1.example/about")
	assert.Equal(t, "", urlPattern(u))
}

// An embed within its hops may leave the scope, by host or by regex; every
// other rule still holds.
func TestScopeEmbeds(t *testing.T) {
	seeds := mustScope(t, campaign.Config{Seeds: []string{"http://example.com/"}, Exclude: []string{`/private/`}, MaxDepth: new(2)})
	regex := mustScope(t, campaign.Config{Seeds: []string{"http://example.com/"}, Scope: []string{`^http://example\.com/blog/`}})
	cases := []struct {
		s      *Scope
		url    string
		depth  int
		reason string
	}{
		{seeds, "http://cdn.example.net/logo.png", 1, ""},
		{regex, "http://example.com/static/site.css", 1, ""},
		{seeds, "http://cdn.example.net/private/x.png", 1, ReasonExcluded},
		{seeds, "http://cdn.example.net/x/x/x/a.png", 1, ReasonRepeats},
		{seeds, "http://cdn.example.net/a.png", 3, ReasonDepth},
		{seeds, "http://exa mple.net/a.png", 1, ReasonInvalidHost},
		{seeds, "ftp://cdn.example.net/a.png", 1, ReasonScheme},
	}
	for _, c := range cases {
		ok, reason := c.s.AllowEmbedNormal(c.url, c.depth, nil)
		assert.Equal(t, c.reason, reason, c.url)
		assert.Equal(t, c.reason == "", ok, c.url)
		// The same URL as a link: out of scope (or refused for its own rule).
		if c.reason == "" {
			ok, reason = c.s.AllowNormal(c.url, c.depth, nil)
			assert.Equal(t, ReasonOutOfScope, reason, fmt.Sprint(c.url, " as a link"))
			assert.True(t, !ok, c.url)
		}
	}
}

// A scope takes the includes of newer rules while it is in use (a
// scheduler pushes them to a running session) and keeps the newest when
// rules reach it out of order.
func TestScopeTakesNewerRules(t *testing.T) {
	s := mustScope(t, campaign.Config{Seeds: []string{"http://example.com/"}, Live: campaign.Rules{Version: 2, Include: []string{`^http://a\.example/`}}})
	inScope := func(u string) bool { ok, _ := allow(s, u, 1); return ok }
	require.True(t, inScope("http://a.example/x"), "the config's include")
	require.False(t, inScope("http://b.example/x"))

	took, err := s.TakeRules(campaign.Rules{Version: 1, Include: []string{`^http://c\.example/`}})
	require.NoError(t, err)
	require.False(t, took, "rules older than the config's")
	require.False(t, inScope("http://c.example/x"))

	took, err = s.TakeRules(campaign.Rules{Version: 3, Include: []string{`^http://a\.example/`, `^http://b\.example/`}})
	require.NoError(t, err)
	require.True(t, took)
	require.True(t, inScope("http://b.example/x"), "the pushed include")
	require.True(t, inScope("http://example.com/x"), "the seeds' hosts stay")

	took, err = s.TakeRules(campaign.Rules{Version: 3, Include: []string{`^http://d\.example/`}})
	require.NoError(t, err)
	require.False(t, took, "the same version again")
	require.False(t, inScope("http://d.example/x"))

	_, err = s.TakeRules(campaign.Rules{Version: 4, Include: []string{`(`}})
	require.ErrorContains(t, err, `include "("`)
	require.True(t, inScope("http://b.example/x"), "a bad include leaves the scope as it was")
}
