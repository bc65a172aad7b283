package urlrule

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRobotsShareOneParsePerFile(t *testing.T) {
	var s RobotsShare
	body := []byte("User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n")
	a := s.Parse(200, body, nil)
	b := s.Parse(200, append([]byte(nil), body...), nil)
	require.Same(t, a, b, "the same bytes share one parse")
	assert.False(t, a.Allowed("/private/x"))
	assert.True(t, a.Allowed("/public"))
	assert.Equal(t, 2*time.Second, a.CrawlDelay())

	other := s.Parse(200, []byte("User-agent: *\nDisallow: /other/\n"), nil)
	assert.NotSame(t, a, other, "other bytes, another parse")
	assert.True(t, other.Allowed("/private/x"))
	assert.Equal(t, 2, s.Len())

	// Answers whose bytes do not matter are parsed apart and not held.
	nf1, nf2 := s.Parse(404, body, nil), s.Parse(404, body, nil)
	assert.NotSame(t, nf1, nf2)
	assert.True(t, nf1.Allowed("/private/x"), "a 404 allows everything")
	un := s.Parse(0, nil, errors.New("connection refused"))
	assert.True(t, un.Unreachable)
	assert.False(t, s.Parse(503, body, nil).Allowed("/public"), "a 503 disallows everything")
	assert.Equal(t, 2, s.Len())
	runtime.KeepAlive(a)
	runtime.KeepAlive(other)
}

func TestRobotsShareForgetsWhatNoOneHolds(t *testing.T) {
	var s RobotsShare
	for i := range 50 {
		s.Parse(200, fmt.Appendf(nil, "User-agent: *\nDisallow: /%d/\n", i), nil)
	}
	kept := s.Parse(200, []byte("User-agent: *\nDisallow: /kept/\n"), nil)
	deadline := time.Now().Add(10 * time.Second)
	for s.Len() > 1 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 1, s.Len(), "the parses no one holds are forgotten, the held one stays")
	again := s.Parse(200, []byte("User-agent: *\nDisallow: /kept/\n"), nil)
	assert.Same(t, kept, again)
	// A file forgotten and parsed again is shared again.
	x := s.Parse(200, []byte("User-agent: *\nDisallow: /0/\n"), nil)
	assert.Same(t, x, s.Parse(200, []byte("User-agent: *\nDisallow: /0/\n"), nil))
	assert.False(t, x.Allowed("/0/a"))
}

func TestRobotsShareConcurrent(t *testing.T) {
	var s RobotsShare
	const callers = 8
	got := make([]*Robots, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			got[i] = s.Parse(200, []byte("User-agent: *\nDisallow: /x/\n"), nil)
		})
	}
	wg.Wait()
	for i := range callers {
		assert.Same(t, got[0], got[i], "caller %d", i)
	}
}
