package frontier_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// While the outcomes waiting to be recorded weigh more than the
// scheduler's RecordBacklog, no lease is granted; once records catch up,
// leasing goes on. The window is widened on purpose: every publish waits
// until the test lets it go, so the one outcome reported (its 150 links
// over a backlog of 100) stays unrecorded.
func TestNoLeaseWhileRecordsFallBehind(t *testing.T) {
	cfg := frontier.DefaultServerConfig()
	cfg.RecordBacklog = 100
	sched := startScheduler(t, cfg, seen.NewMemory())
	var hosts []string
	for i := range 5 {
		hosts = append(hosts, fmt.Sprintf("http://127.66.32.%d:9", i+1))
	}
	var seeds []string
	for _, h := range hosts {
		seeds = append(seeds, h+"/1")
	}
	ccfg := handCampaign(t, seeds...)
	_, f := seedHand(t, sched.addr, ccfg)

	first := map[string]session.Lease{}
	f.pages(t, 3, 20*time.Second, nil, func(l session.Lease) bool {
		first[l.URL] = l
		return len(first) == 3
	})

	var armed atomic.Bool
	var once sync.Once
	blocked, release := make(chan struct{}), make(chan struct{})
	frontier.SetPublishFault(sched.srv, func(exchange, key string) error {
		if armed.Load() {
			once.Do(func() { close(blocked) })
			<-release
		}
		return nil
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	armed.Store(true)
	var one session.Lease
	for _, l := range first {
		one = l
		break
	}
	links := make([]urlrule.Link, 150)
	for i := range links {
		links[i] = urlrule.Link{URL: fmt.Sprintf("%s/new-%d", hosts[0], i)}
	}
	f.report(t, session.Outcome{LeaseID: one.ID, Stored: true, Status: 200, Links: links})
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the record never published its links")
	}

	// Two seeds are held and their hosts free: without the bound they
	// would be leased at once.
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 2}))
	ls := readLeases(t, f, 1500*time.Millisecond)
	assert.Empty(t, ls, "leases granted while 151 outcomes and links waited to be recorded, over a backlog of 100")

	armed.Store(false)
	close(release)
	got := map[string]bool{}
	for _, l := range ls {
		got[l.URL] = true
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		for _, l := range readLeases(t, f, time.Until(deadline)) {
			got[l.URL] = true
		}
	}
	require.Len(t, got, 2, "leases once the record caught up: %v", got)
	for u := range got {
		_, leasedBefore := first[u]
		assert.False(t, leasedBefore, "%s leased twice", u)
	}
}
