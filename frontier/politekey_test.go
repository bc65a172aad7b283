package frontier_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A campaign's URLs go to the shard of their host's politeness key: keyed
// by domain, eight hosts of one domain are all in one shard queue (so one
// scheduler holds them all); keyed by host, they are spread over several.
func TestPolitenessKeyChoosesTheShard(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	var urls []string
	for h := range 8 {
		urls = append(urls, fmt.Sprintf("http://h%d.example.org/", h), fmt.Sprintf("http://h%d.example.org/p/1", h))
	}
	for _, key := range []string{campaign.KeyHost, campaign.KeyDomain} {
		t.Run(key, func(t *testing.T) {
			cfg := campaign.Config{ID: fmt.Sprintf("t-key-%s-%d", key, rand.IntN(1e9)), Seeds: urls[:1], PolitenessKey: key,
				Sinks: []string{"warc:/unused"}}.WithDefaults()
			ctl, err := session.Client{Token: session.DevToken}.DialControl(context.Background(), sched.addr)
			require.NoError(t, err)
			defer ctl.Close()
			seeded, err := ctl.Seed(context.Background(), cfg, urls)
			require.NoError(t, err, "seed")
			require.Equal(t, len(urls), seeded, "URLs seeded")
			defer ctl.CloseCampaign(context.Background(), cfg.ID, true)
			ch, err := sched.conn.Channel()
			require.NoError(t, err)
			defer ch.Close()
			per := map[int]int{} // shard -> URLs
			for i := range frontier.Shards {
				for {
					d, ok, err := ch.Get(frontier.Topology{Campaign: cfg.ID}.Shard(i), true)
					require.NoError(t, err)
					if !ok {
						break
					}
					n := 1
					if v, ok := d.Headers["x-drover-batch"].(int32); ok {
						n = int(v)
					}
					per[i] += n
				}
			}
			switch want := frontier.ShardOf("domain:example.org"); key {
			case campaign.KeyDomain:
				assert.Len(t, per, 1, "keyed by domain, URLs by shard %v; want all %d in shard %d", per, len(urls), want)
				assert.Equal(t, len(urls), per[want], "keyed by domain, URLs by shard %v; want all %d in shard %d", per, len(urls), want)
			case campaign.KeyHost:
				assert.GreaterOrEqual(t, len(per), 2, "keyed by host, URLs by shard %v; want the hosts spread", per)
			}
			t.Logf("keyed by %s: URLs by shard %v", key, per)
		})
	}
}

// Keyed by IP, a new host's first lease resolves it (no request to the
// host), for a session that takes resolve leases; its robots.txt and its
// pages come after. A session that does not is leased robots.txt first,
// as before, its host on its own clock.
func TestIPKeyResolvesFirst(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	for _, resolves := range []bool{true, false} {
		t.Run(fmt.Sprintf("resolves=%v", resolves), func(t *testing.T) {
			cfg := newCampaign(t, fmt.Sprintf("t-ipkey-%d", rand.IntN(1e9)), []string{"http://h1.example.org/"}, 0)
			cfg.PolitenessKey = campaign.KeyIP
			seed(t, sched, cfg)
			cl := session.Client{Token: session.DevToken, Resolves: resolves}
			sess, err := cl.DialSession(context.Background(), sched.addr, "t", cfg, 4)
			require.NoError(t, err)
			defer sess.Close()
			next := func() session.Lease {
				sess.Credit(1)
				select {
				case l := <-sess.Leases():
					return l
				case <-time.After(10 * time.Second):
					require.FailNow(t, "no lease in 10 s")
					return session.Lease{}
				}
			}
			var kinds []session.LeaseKind
			l := next()
			kinds = append(kinds, l.Kind)
			if l.Kind == session.KindResolve {
				assert.Equal(t, "http://h1.example.org", l.URL, "resolve lease, want the host's root")
				sess.Report(session.Outcome{LeaseID: l.ID, IP: "192.0.2.9"})
				l = next()
				kinds = append(kinds, l.Kind)
			}
			sess.Report(session.Outcome{LeaseID: l.ID, Robots: &session.RobotsBody{Status: 404}, IP: "192.0.2.9"})
			l = next()
			kinds = append(kinds, l.Kind)
			sess.Report(session.Outcome{LeaseID: l.ID, Released: true})
			want := []session.LeaseKind{session.KindRobots, session.KindPage}
			if resolves {
				want = append([]session.LeaseKind{session.KindResolve}, want...)
			}
			assert.Equal(t, want, kinds, "lease kinds")
		})
	}
}
