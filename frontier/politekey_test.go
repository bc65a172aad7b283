package frontier_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
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
			if err != nil {
				t.Fatal(err)
			}
			defer ctl.Close()
			if n, err := ctl.Seed(context.Background(), cfg, urls); err != nil || n != len(urls) {
				t.Fatalf("seeded %d of %d: %v", n, len(urls), err)
			}
			defer ctl.CloseCampaign(context.Background(), cfg.ID, true)
			ch, err := sched.conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			per := map[int]int{} // shard -> URLs
			for i := range frontier.Shards {
				for {
					d, ok, err := ch.Get(frontier.Topology{Campaign: cfg.ID}.Shard(i), true)
					if err != nil {
						t.Fatal(err)
					}
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
			switch want := frontier.ShardOf("domain:example.org"); {
			case key == campaign.KeyDomain && (len(per) != 1 || per[want] != len(urls)):
				t.Errorf("keyed by domain, URLs by shard %v; want all %d in shard %d", per, len(urls), want)
			case key == campaign.KeyHost && len(per) < 2:
				t.Errorf("keyed by host, URLs by shard %v; want the hosts spread", per)
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
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			next := func() session.Lease {
				sess.Credit(1)
				select {
				case l := <-sess.Leases():
					return l
				case <-time.After(10 * time.Second):
					t.Fatal("no lease in 10 s")
					return session.Lease{}
				}
			}
			var kinds []session.LeaseKind
			l := next()
			kinds = append(kinds, l.Kind)
			if l.Kind == session.KindResolve {
				if l.URL != "http://h1.example.org" {
					t.Errorf("resolve lease of %q, want the host's root", l.URL)
				}
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
			if !slices.Equal(kinds, want) {
				t.Errorf("leases %q, want %q", kinds, want)
			}
		})
	}
}
