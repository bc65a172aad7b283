package frontier_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An exclude added while a campaign runs: the URLs it matches that the
// scheduler holds are settled as "excluded" at once; the call returns only
// after the lease of a matching URL that was out has come back; no
// matching URL is leased afterwards, whether it was held, queued, found as
// a link later, or seeded after the scheduler restarted on its store.
func TestLiveExclude(t *testing.T) {
	store := seen.NewMemory()
	sched := startScheduler(t, frontier.DefaultServerConfig(), store)
	const host = "http://127.66.71.1:9"
	var seeds, cal []string
	for i := range 10 {
		seeds = append(seeds, fmt.Sprintf("%s/cal/%d", host, i), fmt.Sprintf("%s/keep/%d", host, i))
		cal = append(cal, fmt.Sprintf("%s/cal/%d", host, i))
	}
	cfg := handCampaign(t, seeds...)
	ctl, f := seedHand(t, sched.addr, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// One lease out, of the first seed: /cal/0.
	var out session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { out = l; return true })
	require.Equal(t, cal[0], out.URL, "first lease")
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "every seed held, one leased", func(st session.Stats) bool { return st.Held == int64(len(seeds)) && st.InFlight == 1 })

	rules := campaign.Rules{}.WithExclude("/cal/")
	returned := make(chan error, 1)
	ruler := control(t, sched.addr) // a control session answers one call at a time
	go func() { _, err := ruler.SetRules(ctx, cfg.FrontierKey(), rules); returned <- err }()
	// The held ones are settled at once...
	excluded := func() []string {
		fs, _, err := ctl.Failures(ctx, cfg.FrontierKey(), frontier.ReasonExcluded)
		require.NoError(t, err)
		var urls []string
		for _, r := range fs {
			urls = append(urls, r.URL)
		}
		slices.Sort(urls)
		return urls
	}
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "the held /cal/ URLs settled", func(st session.Stats) bool { return st.Held == int64(len(seeds)/2+1) })
	require.Equal(t, sorted(cal[1:]), excluded(), "excluded URLs")
	// ...but the call waits for the lease out.
	select {
	case err := <-returned:
		require.FailNowf(t, "SetRules returned early", "SetRules returned (%v) with the lease of %s still out", err, out.URL)
	default:
	}
	f.report(t, session.Outcome{LeaseID: out.ID, Stored: true, Status: 200,
		Links: []urlrule.Link{{URL: host + "/cal/new"}, {URL: host + "/keep/new"}}})
	select {
	case err := <-returned:
		require.NoError(t, err)
	case <-ctx.Done():
		require.FailNow(t, "SetRules did not return once the lease came back")
	}

	// The rest: every /keep/ URL and the new /keep/ link, no /cal/ one.
	var leased []string
	f.pages(t, 4, 30*time.Second, nil, func(l session.Lease) bool {
		leased = append(leased, l.URL)
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
		return len(leased) == len(seeds)/2+1
	})
	for _, u := range leased {
		assert.NotContains(t, u, "/cal/", "%s leased after the exclude returned", u)
	}
	assert.Contains(t, leased, host+"/keep/new", "the new /keep/ link was not leased")

	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "every outcome recorded", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Pending == 0
	})

	// Restarted on its store, the scheduler keeps the rule: a /cal/ URL
	// seeded now (by a config that does not carry the rule) is settled.
	f.c.Close()
	sched.stop()
	sched = startScheduler(t, frontier.DefaultServerConfig(), store)
	ctl = control(t, sched.addr)
	late := cfg
	late.Seeds = []string{host + "/cal/late", host + "/keep/late"}
	seeded, err := ctl.Seed(ctx, late, late.Seeds)
	require.NoError(t, err, "seed after restart")
	require.Equal(t, 2, seeded, "seed after restart: URLs seeded")
	f = dialRawFetcher(t, sched.addr, cfg)
	defer f.c.Close()
	f.pages(t, 2, 30*time.Second, nil, func(l session.Lease) bool {
		assert.Equal(t, host+"/keep/late", l.URL, "leased after the restart, want only /keep/late")
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	assert.Contains(t, excluded(), host+"/cal/late", "after the restart, excluded: want /cal/late among them")
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "/cal/late settled", func(st session.Stats) bool { return st.Held == 0 && st.Queued == 0 })
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// A host rule added while a campaign runs sets the host's delay from its
// next lease on: leases of the host come at least that far apart.
func TestLiveHostDelay(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const host = "http://127.66.72.1:9"
	var seeds []string
	for i := range 6 {
		seeds = append(seeds, fmt.Sprintf("%s/p/%d", host, i))
	}
	cfg := handCampaign(t, seeds...)
	ctl, f := seedHand(t, sched.addr, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var first session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { first = l; return true })

	const delay = 700 * time.Millisecond
	rules := campaign.Rules{}.WithHost(campaign.HostRule{Host: "127.66.72.1", Delay: new(delay)})
	_, err := ctl.SetRules(ctx, cfg.FrontierKey(), rules)
	require.NoError(t, err)
	f.report(t, session.Outcome{LeaseID: first.ID, Stored: true, Status: 200})
	var at []time.Time
	f.pages(t, 1, 30*time.Second, nil, func(l session.Lease) bool {
		at = append(at, time.Now())
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
		return len(at) == len(seeds)-1
	})
	for i := 1; i < len(at); i++ {
		gap := at[i].Sub(at[i-1])
		assert.GreaterOrEqual(t, gap, delay-50*time.Millisecond, "leases %d and %d %s apart, want at least the live rule's %s", i-1, i, gap, delay)
	}
}

// Rules that reach a scheduler only with a fetcher session (the Update
// could not reach it) apply to the actor already there; a host blocked
// past the hold window parks the URLs held for it rather than keep their
// deliveries unacked.
func TestLiveRulesFromASessionAndABlock(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const host = "http://127.66.76.1:9"
	var seeds []string
	for i := range 4 {
		seeds = append(seeds, fmt.Sprintf("%s/cal/%d", host, i), fmt.Sprintf("%s/keep/%d", host, i))
	}
	cfg := handCampaign(t, seeds...)
	ctl, f := seedHand(t, sched.addr, cfg)
	defer f.c.Close()
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "every seed held", func(st session.Stats) bool { return st.Held == int64(len(seeds)) })

	later := cfg
	later.Live = campaign.Rules{}.WithExclude("/cal/")
	f2 := dialRawFetcher(t, sched.addr, later)
	defer f2.c.Close()
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "the /cal/ URLs settled by the session's rules", func(st session.Stats) bool {
		return st.Held == int64(len(seeds)/2)
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	block := time.Now().Add(time.Hour)
	rules := later.Live.WithHost(campaign.HostRule{Host: "127.66.76.1", BlockUntil: &block})
	_, err := ctl.SetRules(ctx, cfg.FrontierKey(), rules)
	require.NoError(t, err)
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "the blocked host's URLs parked", func(st session.Stats) bool {
		return st.Held == 0
	})
}

// An include reaches the running fetcher sessions that ask for pushed
// rules (FrameRules), without a new session: at once for those open, at
// their hello for one that joins with older rules, newest first whatever
// order they come in; the reply counts the sessions that did not ask
// (Stale), which the workflow restarts.
func TestIncludePushedToRunningSessions(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := handCampaign(t, "http://127.66.77.1:9/a")
	ctl, raw := seedHand(t, sched.addr, cfg) // asks for no rules: stale
	defer raw.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(name string, with campaign.Config) chan campaign.Rules {
		got := make(chan campaign.Rules, 8)
		cl := session.Client{Token: session.DevToken, Rules: func(r campaign.Rules) error { got <- r; return nil }}
		s, err := cl.DialSessionKey(ctx, sched.addr, name, name, with, 1)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return got
	}
	next := func(got chan campaign.Rules, what string) campaign.Rules {
		t.Helper()
		select {
		case r := <-got:
			return r
		case <-time.After(10 * time.Second):
			require.FailNowf(t, "no rules pushed", "%s: no rules pushed within 10s", what)
		}
		return campaign.Rules{}
	}
	none := func(got chan campaign.Rules, what string) {
		t.Helper()
		select {
		case r := <-got:
			require.FailNowf(t, "rules pushed", "%s: rules version %d pushed, want none", what, r.Version)
		default:
		}
	}

	open := dial("open", cfg)
	v1 := campaign.Rules{}.WithInclude(`^http://127\.66\.77\.2:9/`)
	taken, err := ctl.SetRules(ctx, cfg.FrontierKey(), v1)
	require.NoError(t, err)
	assert.True(t, taken.Pushed, "SetRules: %+v, want pushed with 1 stale session (the raw one)", taken)
	assert.Equal(t, 1, taken.Stale, "SetRules: %+v, want pushed with 1 stale session (the raw one)", taken)
	r1 := next(open, "the open session")
	assert.Equal(t, int64(1), r1.Version, "the open session got %+v, want %+v", r1, v1)
	assert.Equal(t, v1.Include, r1.Include, "the open session got %+v, want %+v", r1, v1)

	joins := dial("joins", cfg) // started before the include
	assert.Equal(t, int64(1), next(joins, "a session joining with older rules").Version, "the joining session's rules version")
	withV1 := cfg
	withV1.Live = v1
	current := dial("current", withV1)

	// An older version again changes nothing and pushes nothing.
	_, err = ctl.SetRules(ctx, cfg.FrontierKey(), campaign.Rules{}.WithInclude("^http://old/"))
	require.NoError(t, err)
	v2 := v1.WithInclude(`^http://127\.66\.77\.3:9/`)
	_, err = ctl.SetRules(ctx, cfg.FrontierKey(), v2)
	require.NoError(t, err)
	for _, s := range []struct {
		got  chan campaign.Rules
		name string
	}{{open, "open"}, {joins, "joins"}, {current, "current"}} {
		r := next(s.got, s.name)
		assert.Equal(t, int64(2), r.Version, "session %s: next rules %+v, want %+v (nothing for the older ones)", s.name, r, v2)
		assert.Equal(t, v2.Include, r.Include, "session %s: next rules %+v, want %+v (nothing for the older ones)", s.name, r, v2)
		none(s.got, s.name)
	}
}

// A fetcher that does not take pushed rules (a worker from before them)
// and lacks a live include the campaign has is refused, saying why, so
// that its campaign starts it again with the include; with the include in
// its config it is welcomed.
func TestOldFetcherWithoutAnIncludeRefused(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := handCampaign(t, "http://127.66.78.1:9/a")
	ctl, raw := seedHand(t, sched.addr, cfg)
	defer raw.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rules := campaign.Rules{}.WithInclude(`^http://127\.66\.78\.2:9/`)
	_, err := ctl.SetRules(ctx, cfg.FrontierKey(), rules)
	require.NoError(t, err)

	// The frames the scheduler sends within a second of the hello.
	hello := func(c campaign.Config) []session.FrameType {
		conn := dialRaw(t, sched.addr)
		writeRaw(t, conn, jsonFrame(t, session.FrameHello, session.Hello{Version: session.ProtocolVersion, Token: session.DevToken, Role: session.RoleFetcher, Client: "old", Campaign: &c}))
		var got []session.FrameType
		for {
			ft, payload, err := readFrame(conn, time.Second)
			if err != nil {
				return got
			}
			got = append(got, ft)
			if ft == session.FrameRefused {
				var r session.Refused
				require.NoError(t, session.Decode(ft, payload, &r))
				assert.True(t, r.Ended, "refused as ended, so that the worker returns: %+v", r)
				assert.Contains(t, r.Reason, "lacks a live include")
			}
		}
	}
	require.Equal(t, []session.FrameType{session.FrameWelcome, session.FrameRefused}, hello(cfg), "an old fetcher without the include")
	with := cfg
	with.Live = rules
	require.Equal(t, []session.FrameType{session.FrameWelcome}, hello(with), "an old fetcher with the include")
}
