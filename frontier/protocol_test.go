package frontier_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/urlrule"
)

// Hostile-input tests of the scheduler: raw bytes on its TCP
// port, sessions that misbehave, and unreadable messages in its queues.

// frame encodes one frame by hand: a 4-byte big-endian length n, then n
// bytes: the frame type and the payload.
func frame(t session.FrameType, payload []byte) []byte {
	b := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)+1))
	b[4] = byte(t)
	return append(b, payload...)
}

func jsonFrame(t *testing.T, ft session.FrameType, v any) []byte {
	t.Helper()
	p, err := json.Marshal(v)
	require.NoError(t, err)
	return frame(ft, p)
}

// frameRestWithin bounds reading the rest of a frame whose first byte came.
const frameRestWithin = 30 * time.Second

// readFrame reads one frame by hand; d bounds the wait for its first byte.
func readFrame(c net.Conn, d time.Duration) (session.FrameType, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:1]); err != nil {
		return 0, nil, err // nothing of a frame read: the caller may read again
	}
	// A frame has begun: the rest gets its own time, so that d running out
	// mid-frame cannot leave the stream cut in the middle of one (the next
	// read would take a body's bytes for a length).
	_ = c.SetReadDeadline(time.Now().Add(frameRestWithin))
	if _, err := io.ReadFull(c, hdr[1:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > session.MaxFrame {
		return 0, nil, errors.New("bad length from the scheduler")
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, nil, err
	}
	return session.FrameType(buf[0]), buf[1:], nil
}

// expectClosed reads until the scheduler closes the connection; it fails on
// a timeout (the connection stayed open). It returns the frames read.
func expectClosed(t *testing.T, c net.Conn, within time.Duration) []session.FrameType {
	t.Helper()
	deadline := time.Now().Add(within)
	var got []session.FrameType
	for {
		ft, _, err := readFrame(c, time.Until(deadline))
		if err == nil {
			got = append(got, ft)
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			require.FailNowf(t, "connection still open", "connection still open after %s (frames read: %v)", within, got)
		}
		return got // EOF or reset: closed
	}
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func writeRaw(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Write(b)
	require.NoError(t, err, "write")
}

func control(t *testing.T, addr string) *session.Control {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctl, err := session.Client{Token: session.DevToken}.DialControl(ctx, addr)
	require.NoError(t, err)
	t.Cleanup(func() { ctl.Close() })
	return ctl
}

func stats(t *testing.T, ctl *session.Control, id string) session.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := ctl.Stats(ctx, id)
	require.NoError(t, err, "stats")
	return st
}

// waitStats polls the stats until ok holds, within d.
func waitStats(t *testing.T, ctl *session.Control, id string, d time.Duration, what string, ok func(session.Stats) bool) session.Stats {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st := stats(t, ctl, id)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "stats condition not met", "%s: not within %s; stats %+v", what, d, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// seedCampaign seeds cfg and removes the campaign's queues at the end.
func seedCampaign(t *testing.T, ctl *session.Control, cfg campaign.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := ctl.Seed(ctx, cfg, cfg.Seeds)
	require.NoError(t, err, "seed")
	require.Equal(t, len(cfg.Seeds), n, "seed: URLs seeded")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := ctl.CloseCampaign(ctx, cfg.ID, true); err != nil {
			t.Logf("close campaign: %v", err)
		}
	})
}

// 1. Hostile handshakes: each is refused with a reason that names the
// problem, the connection is closed, and the scheduler keeps serving.
func TestHostileHandshake(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	bad := campaign.Config{}.WithDefaults() // no ID, no seeds, no sink
	require.Error(t, bad.Validate(), "an empty campaign config validates; the case below tests nothing")
	hello := func(v int, token, role string) session.Hello {
		return session.Hello{Version: v, Token: token, Role: role, Client: "hostile"}
	}
	cases := []struct {
		name     string
		bytes    func(t *testing.T) []byte
		closeW   bool // half-close after writing (a truncated frame)
		want     []string
		wantNone []string
	}{
		{name: "wrong token",
			bytes: func(t *testing.T) []byte {
				return jsonFrame(t, session.FrameHello, hello(session.ProtocolVersion, "not-the-token", session.RoleControl))
			},
			want: []string{"wrong or missing token", "DROVER_TOKEN"}, wantNone: []string{session.DevToken}},
		{name: "missing token",
			bytes: func(t *testing.T) []byte {
				return jsonFrame(t, session.FrameHello, hello(session.ProtocolVersion, "", session.RoleFetcher))
			},
			want: []string{"wrong or missing token"}, wantNone: []string{session.DevToken}},
		{name: "protocol version 99",
			bytes: func(t *testing.T) []byte {
				return jsonFrame(t, session.FrameHello, hello(99, session.DevToken, session.RoleControl))
			},
			want: []string{"protocol version 99 not supported", "speaks 1"}},
		{name: "protocol version 99 and wrong token",
			bytes: func(t *testing.T) []byte {
				return jsonFrame(t, session.FrameHello, hello(99, "nope", session.RoleControl))
			},
			want: []string{"protocol version 99"}},
		{name: "unknown role",
			bytes: func(t *testing.T) []byte {
				return jsonFrame(t, session.FrameHello, hello(session.ProtocolVersion, session.DevToken, "admin"))
			},
			want: []string{`unknown role "admin"`}},
		{name: "fetcher without campaign",
			bytes: func(t *testing.T) []byte {
				return jsonFrame(t, session.FrameHello, hello(session.ProtocolVersion, session.DevToken, session.RoleFetcher))
			},
			want: []string{"needs its campaign"}},
		{name: "fetcher with invalid campaign",
			bytes: func(t *testing.T) []byte {
				h := hello(session.ProtocolVersion, session.DevToken, session.RoleFetcher)
				h.Campaign = &bad
				return jsonFrame(t, session.FrameHello, h)
			},
			want: []string{"campaign config"}},
		{name: "first frame not hello",
			bytes: func(t *testing.T) []byte { return jsonFrame(t, session.FrameCredit, session.Credit{N: 10}) },
			want:  []string{"expected a hello frame, got credit"}},
		{name: "unknown frame type",
			bytes: func(t *testing.T) []byte { return frame(session.FrameType(200), []byte(`{}`)) },
			want:  []string{"expected a hello frame", "frame(200)"}},
		{name: "length above MaxFrame",
			bytes: func(t *testing.T) []byte { return []byte{0xFF, 0xFF, 0xFF, 0xFF} },
			want:  []string{"frame too large", "4294967295"}},
		{name: "length just above MaxFrame",
			bytes: func(t *testing.T) []byte {
				b := make([]byte, 4)
				binary.BigEndian.PutUint32(b, session.MaxFrame+1)
				return b
			},
			want: []string{"frame too large"}},
		{name: "zero-length frame",
			bytes: func(t *testing.T) []byte { return []byte{0, 0, 0, 0} },
			want:  []string{"empty frame", "malformed frame"}},
		{name: "garbage JSON in hello",
			bytes: func(t *testing.T) []byte { return frame(session.FrameHello, []byte(`{"version":1,"token":`)) },
			want:  []string{"hello frame", "malformed frame"}},
		{name: "hello with no payload",
			bytes: func(t *testing.T) []byte { return frame(session.FrameHello, nil) },
			want:  []string{"hello frame", "malformed frame"}},
		{name: "wrong JSON types in hello",
			bytes: func(t *testing.T) []byte {
				return frame(session.FrameHello, []byte(`{"version":"1","token":7,"role":["control"]}`))
			},
			want: []string{"hello frame", "malformed frame"}},
		{name: "truncated frame",
			bytes: func(t *testing.T) []byte {
				b := jsonFrame(t, session.FrameHello, hello(session.ProtocolVersion, session.DevToken, session.RoleControl))
				return b[:len(b)-5]
			},
			closeW: true,
			want:   []string{"reading hello", "unexpected EOF"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, sched.addr)
			writeRaw(t, c, tc.bytes(t))
			if tc.closeW {
				_ = c.(*net.TCPConn).CloseWrite()
			}
			ft, payload, err := readFrame(c, 5*time.Second)
			require.NoError(t, err, "no refused frame")
			require.Equal(t, session.FrameRefused, ft, "got a %s frame, want refused", ft)
			var r session.Refused
			require.NoError(t, json.Unmarshal(payload, &r), "refused payload %q", payload)
			for _, w := range tc.want {
				assert.Contains(t, r.Reason, w, "reason does not mention %q", w)
			}
			for _, w := range tc.wantNone {
				assert.NotContains(t, r.Reason, w, "reason leaks %q", w)
			}
			more := expectClosed(t, c, 5*time.Second)
			assert.Empty(t, more, "frames after the refusal")
		})
	}
	// The scheduler keeps serving.
	ctl := control(t, sched.addr)
	st := stats(t, ctl, "t-hostile-after")
	assert.Equal(t, "t-hostile-after", st.Campaign, "stats after hostile handshakes: %+v", st)
	// And a real client's refusal says why too.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := (session.Client{Token: "wrong"}).DialControl(ctx, sched.addr)
	if assert.ErrorIs(t, err, session.ErrRefused, "DialControl with a wrong token") {
		assert.ErrorContains(t, err, "token", "DialControl with a wrong token")
	}
}

// rawFetcher is a fetcher session spoken by hand.
type rawFetcher struct {
	c net.Conn
}

func dialRawFetcher(t *testing.T, addr string, cfg campaign.Config) *rawFetcher {
	t.Helper()
	c := dialRaw(t, addr)
	writeRaw(t, c, jsonFrame(t, session.FrameHello, session.Hello{Version: session.ProtocolVersion, Token: session.DevToken, Role: session.RoleFetcher, Client: "raw", Campaign: &cfg}))
	ft, payload, err := readFrame(c, 10*time.Second)
	require.NoError(t, err, "handshake: %s %s", ft, payload)
	require.Equal(t, session.FrameWelcome, ft, "handshake: %s %s", ft, payload)
	return &rawFetcher{c: c}
}

// leases gives credit and reads until at least one lease came.
func (f *rawFetcher) leases(t *testing.T, credit int) []session.Lease {
	t.Helper()
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: credit}))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ls := readLeases(t, f, time.Until(deadline)); len(ls) > 0 {
			return ls
		}
	}
	require.FailNow(t, "no leases within 20s")
	return nil
}

// 2. A fetcher session that sends a hostile frame mid-session is closed,
// its leases go back at once (not at their deadline), and the crawl
// completes with real fetchers. At each hostile frame the session holds
// both kinds of lease: the robots.txt lease of one host and a page lease of
// each other host.
func TestHostileFrameMidSession(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 30, CrossHost: true, Base: 32})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory()) // lease timeout 1 min
	cfg := testCampaign(t, web)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	var hosts []string
	for _, s := range web.Seeds() {
		hosts = append(hosts, hostOf(t, s))
	}
	lr := newLoseRig(t, sched, ctl, cfg, hosts[len(hosts)-1], hosts[:len(hosts)-1])

	cases := []struct {
		name  string
		bytes func(t *testing.T) []byte
	}{
		{"malformed outcomes", func(t *testing.T) []byte {
			return frame(session.FrameOutcomes, []byte(`{"items":[{"lease":`))
		}},
		{"outcomes of the wrong shape", func(t *testing.T) []byte {
			return frame(session.FrameOutcomes, []byte(`{"items":{"lease":"x"}}`))
		}},
		{"length above MaxFrame", func(t *testing.T) []byte { return []byte{0xFF, 0xFF, 0xFF, 0xFF} }},
		{"zero-length frame", func(t *testing.T) []byte { return []byte{0, 0, 0, 0} }},
		{"negative credit", func(t *testing.T) []byte { return jsonFrame(t, session.FrameCredit, session.Credit{N: -5}) }},
		{"a server frame from the client", func(t *testing.T) []byte {
			return jsonFrame(t, session.FrameWelcome, session.Welcome{Version: 1})
		}},
	}
	var noRefused []string
	for _, tc := range cases {
		// A failed case leaves leases out for a minute, and every later
		// case would time out waiting for its own: stop at the first.
		if t.Failed() {
			break
		}
		t.Run(tc.name, func(t *testing.T) {
			lr.lose(t, func(c net.Conn) {
				writeRaw(t, c, tc.bytes(t))
				frames := expectClosed(t, c, 10*time.Second)
				refused := false
				for _, ft := range frames {
					refused = refused || ft == session.FrameRefused
				}
				if !refused {
					noRefused = append(noRefused, tc.name)
				}
			})
		})
	}
	if t.Failed() {
		return
	}
	assert.GreaterOrEqual(t, len(lr.lost), len(cases), "only %d distinct page leases were lost over %d hostile sessions", len(lr.lost), len(cases))
	lr.crawlRest(t, web)

	// protocol.go: "The server refuses ... a malformed or oversized frame
	// with a Refused frame saying why, then closes."
	t.Run("refused frame says why", func(t *testing.T) {
		assert.Empty(t, noRefused, "no Refused frame before the close mid-session for: %s", strings.Join(noRefused, "; "))
	})
}

// A fetcher session lost while it holds leases, without a word to the
// scheduler: its connection reset (the fetcher's process died), or silent
// (a network partition: no FIN, no more pings). Its robots.txt and page
// leases go back when the scheduler sees the session gone (at once, or
// after 3 keepalives of silence), not at the lease timeout, and the crawl
// completes with every page fetched once.
func TestSessionLostMidLease(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 10, CrossHost: true, Base: 37})
	scfg := frontier.DefaultServerConfig()
	// Silence is detected after 3 keepalives (3 s), the lease timeout is a
	// minute: leaseBackWithin tells them apart.
	scfg.KeepAlive = time.Second
	sched := startScheduler(t, scfg, seen.NewMemory())
	cfg := testCampaign(t, web)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	lr := newLoseRig(t, sched, ctl, cfg, hostOf(t, web.Seeds()[1]), []string{hostOf(t, web.Seeds()[0])})

	for _, tc := range []struct {
		name string
		lose func(t *testing.T, c net.Conn)
	}{
		{"connection reset", func(t *testing.T, c net.Conn) {
			_ = c.(*net.TCPConn).SetLinger(0) // RST, as when a process dies mid-write
			c.Close()
		}},
		{"connection silent", func(t *testing.T, c net.Conn) {}},
	} {
		if t.Failed() {
			break
		}
		t.Run(tc.name, func(t *testing.T) {
			lr.lose(t, func(c net.Conn) { tc.lose(t, c) })
		})
	}
	if t.Failed() {
		return
	}
	lr.crawlRest(t, web)
	for u := range lr.lost {
		assert.Equal(t, 1, web.Count(u), "%s, whose lease a lost session held: times requested", u)
	}
}

// leaseBackWithin bounds how long a scheduler may take to put back the
// leases of a session that ended. It is far below the default 1-minute
// lease timeout, so a lease that went back only at its deadline fails the
// wait, and far above what a session's end takes (milliseconds), so that a
// loaded 2-core machine running -race does not fail it.
const leaseBackWithin = 15 * time.Second

// holdWithin bounds how long a rawFetcher may take to get the leases it
// wants to hold (robots.txt answered, a page fetched and its links
// published and delivered, per host).
const holdWithin = 30 * time.Second

// loseRig loses, one session at a time, fetcher sessions that hold leases
// of one campaign, then crawls what is left with real fetchers.
type loseRig struct {
	sched      *scheduler
	ctl        *session.Control
	cfg        campaign.Config
	fe         *fetch.Fetcher
	sk         *sink.Memory
	robotsHost string          // the host whose robots.txt lease is held
	pageHosts  []string        // the hosts of which one page lease each is held
	lost       map[string]bool // page URLs whose lease a lost session held
}

func newLoseRig(t *testing.T, sched *scheduler, ctl *session.Control, cfg campaign.Config, robotsHost string, pageHosts []string) *loseRig {
	t.Helper()
	fe, err := fetch.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { fe.Close() })
	return &loseRig{sched: sched, ctl: ctl, cfg: cfg, fe: fe, sk: sink.NewMemory(),
		robotsHost: robotsHost, pageHosts: pageHosts, lost: map[string]bool{}}
}

// lose dials a session that holds leases (see hold), hands its connection
// to how, and waits until the scheduler sees the session gone and has
// every lease back, well before the 1-minute lease timeout.
func (r *loseRig) lose(t *testing.T, how func(c net.Conn)) {
	t.Helper()
	f := dialRawFetcher(t, r.sched.addr, r.cfg)
	held := f.hold(t, r.fe, r.sk, r.robotsHost, r.pageHosts, r.lost)
	waitStats(t, r.ctl, r.cfg.ID, 5*time.Second, "the held leases in flight", func(st session.Stats) bool {
		return st.InFlight == int64(held.n()) && st.Sessions == 1
	})
	how(f.c)
	waitStats(t, r.ctl, r.cfg.ID, leaseBackWithin, "session gone and its robots and page leases back", func(st session.Stats) bool {
		return st.InFlight == 0 && st.Sessions == 0
	})
	for _, l := range held.pages {
		r.lost[l.URL] = true
	}
}

// crawlRest crawls the campaign to its end with real fetchers: every page
// of web fetched and stored once, none dead-lettered.
func (r *loseRig) crawlRest(t *testing.T, web *testweb.Web) {
	t.Helper()
	addrs := []string{r.sched.addr}
	startFleet(t, r.cfg, addrs, r.sk, 2)
	st := waitDrained(t, addrs, r.cfg.ID, 2*time.Minute)
	checkCrawl(t, web, r.sk, true)
	assert.Equal(t, int64(len(web.Pages())), st.Fetched, "pages fetched (%d dead-lettered)", st.DeadLettered)
	assert.Zero(t, st.DeadLettered, "dead-lettered (fetched %d of %d pages)", st.Fetched, len(web.Pages()))
}

// heldLeases are leases a rawFetcher holds without reporting them.
type heldLeases struct {
	robots []session.Lease
	pages  []session.Lease
}

func (h heldLeases) n() int { return len(h.robots) + len(h.pages) }

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	return u.Host
}

// hold plays a fetcher until it holds, unreported, the robots.txt lease of
// robotsHost and one page lease of each of pageHosts. On the way it answers
// the other robots.txt leases truthfully (so pages can be leased), and it
// fetches, stores in sk and reports every page lease whose URL is in
// fetchNow, as a real fetcher would: a URL whose lease is lost three times
// is dead-lettered as poison (maxLost), so a test that loses page leases
// over and over must let the ones it lost before be fetched. It pings
// while it waits, so the session stays up.
func (f *rawFetcher) hold(t *testing.T, fe *fetch.Fetcher, sk sink.Sink, robotsHost string, pageHosts []string, fetchNow map[string]bool) heldLeases {
	t.Helper()
	var h heldLeases
	want := map[string]bool{}
	for _, host := range pageHosts {
		want[host] = true
	}
	haveRobots := robotsHost == ""
	// Credit for more than the leases held at once: per-host concurrency
	// 1 means one lease per host out at a time, whatever the credit.
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 16}))
	ctx, cancel := context.WithTimeout(context.Background(), holdWithin)
	defer cancel()
	deadline := time.Now().Add(holdWithin)
	for !haveRobots || len(want) > 0 {
		if time.Now().After(deadline) {
			require.FailNowf(t, "leases not held in time", "within %s: holding %d robots and %d page leases; still waiting for robots of %q (%v) and pages of %v",
				holdWithin, len(h.robots), len(h.pages), robotsHost, !haveRobots, want)
		}
		for _, l := range readLeases(t, f, time.Until(deadline)) {
			host := hostOf(t, l.URL)
			switch {
			case l.Kind == session.KindRobots && host == robotsHost:
				h.robots = append(h.robots, l)
				haveRobots = true
			case l.Kind == session.KindRobots:
				rr := fe.FetchRobots(ctx, l.URL)
				o := session.Outcome{LeaseID: l.ID, Robots: &session.RobotsBody{Status: rr.Status, Body: rr.Body}}
				if rr.Err != nil {
					o.Robots.Error = rr.Err.Error()
				}
				f.report(t, o)
			case fetchNow[l.URL]:
				res := fe.Fetch(ctx, fetch.Request{URL: l.URL, Depth: l.Depth, Hops: l.Hops, Parent: l.Parent, Attempt: l.Attempt, MaxAttempts: l.MaxAttempts})
				require.NotNil(t, res.Page, "fetching %s: no page (%v)", l.URL, res.Err)
				require.False(t, res.Retry, "fetching %s: retry (%v)", l.URL, res.Err)
				require.NoError(t, sk.Store(ctx, res.Page))
				o := session.Outcome{LeaseID: l.ID, Stored: true, Status: res.Page.Status}
				for _, ln := range res.Links {
					o.Links = append(o.Links, urlrule.Link{URL: ln.URL, Hops: ln.Hops})
				}
				f.report(t, o)
			case want[host]:
				h.pages = append(h.pages, l)
				delete(want, host)
			default:
				require.FailNowf(t, "unexpected lease", "unexpected lease of %s (kind %v): per-host concurrency 1 allows one lease per host", l.URL, l.Kind)
			}
		}
	}
	return h
}

// hungFetcher is a session that answers robots leases (truthfully, so
// robots.txt is obeyed) and holds every page lease without reporting it,
// while the client keeps pinging.
type hungFetcher struct {
	sess *session.Session
	mu   sync.Mutex
	got  []session.Lease // page leases, in arrival order
	at   []time.Time
}

func startHung(t *testing.T, addr string, cfg campaign.Config, credit int) *hungFetcher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := session.Client{Token: session.DevToken}.DialSession(ctx, addr, "hung", cfg, credit)
	require.NoError(t, err)
	f, err := fetch.New(cfg)
	require.NoError(t, err)
	h := &hungFetcher{sess: sess}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range sess.Leases() {
			if l.Kind == session.KindRobots {
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				rr := f.FetchRobots(rctx, l.URL)
				cancel()
				o := session.Outcome{LeaseID: l.ID, Robots: &session.RobotsBody{Status: rr.Status, Body: rr.Body}}
				if rr.Err != nil {
					o.Robots.Error = rr.Err.Error()
				}
				sess.Report(o)
				continue
			}
			h.mu.Lock()
			h.got = append(h.got, l)
			h.at = append(h.at, time.Now())
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		sess.Close()
		<-done
		f.Close()
	})
	sess.Credit(credit)
	return h
}

func (h *hungFetcher) pageLeases() ([]session.Lease, []time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]session.Lease(nil), h.got...), append([]time.Time(nil), h.at...)
}

func (h *hungFetcher) waitPageLeases(t *testing.T, n int, within time.Duration) []session.Lease {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ls, _ := h.pageLeases()
		if len(ls) >= n {
			return ls
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "too few page leases", "hung fetcher got %d page leases within %s, want %d", len(ls), within, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func shortLeases() frontier.ServerConfig {
	c := frontier.DefaultServerConfig()
	c.LeaseTimeout, c.MaxLease, c.KeepAlive = 2*time.Second, 3*time.Second, 500*time.Millisecond
	return c
}

// expirySlack is how long after a lease's MaxLease its URL may take to be
// requested by another fetcher: the scheduler's 1 s expiry tick, a lease
// to the fleet and one fetch, with room for -race on 2 busy cores. A lease
// that the pings renewed past MaxLease would not come back at all.
const expirySlack = 10 * time.Second

// transitSlack is how much earlier than its grant the hung fetcher may
// note a lease's arrival (it notes it after the grant, so only clock
// granularity): no re-lease may come before LeaseTimeout - transitSlack.
const transitSlack = 200 * time.Millisecond

// 3a. A fetcher that takes leases and never reports, though it keeps
// pinging: its leases expire (MaxLease caps the renewals) and real fetchers
// complete the crawl. One lost lease round dead-letters nothing.
func TestHungFetcherLeasesExpire(t *testing.T) {
	const hosts = 3
	const fleet = 2
	web := webtest.Start(t, testweb.Config{Hosts: hosts, PagesPerHost: 30, CrossHost: true, Base: 33})
	scfg := shortLeases()
	sched := startScheduler(t, scfg, seen.NewMemory())
	cfg := testCampaign(t, web)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)

	// Credit for each host's robots lease and one page lease per host (the
	// per-host concurrency is 1): after these it has no credit left.
	hung := startHung(t, sched.addr, cfg, 2*hosts)
	held := hung.waitPageLeases(t, hosts, 20*time.Second)
	sk := sink.NewMemory()
	startFleet(t, cfg, []string{sched.addr}, sk, fleet)

	// The held URLs are fetched by the fleet after their leases expired:
	// not before the lease timeout, and within expirySlack of the max lease
	// age, though the hung session keeps renewing them with its pings.
	_, at := hung.pageLeases()
	for i, l := range held {
		var first time.Time
		within := time.Until(at[i].Add(scfg.MaxLease + expirySlack))
		await.For(t, within, 50*time.Millisecond, "the held URL fetched again after its lease", func() error {
			for _, r := range web.Requests() {
				if r.URL == l.URL {
					first = r.Start
					return nil
				}
			}
			return fmt.Errorf("held URL %s not requested again %s after its lease (max lease %s)", l.URL, scfg.MaxLease+expirySlack, scfg.MaxLease)
		})
		wait := first.Sub(at[i])
		assert.GreaterOrEqual(t, wait, scfg.LeaseTimeout-transitSlack, "held URL %s fetched %s after its lease, before the lease timeout %s", l.URL, wait, scfg.LeaseTimeout)
	}

	st := waitDrained(t, []string{sched.addr}, cfg.ID, 2*time.Minute)
	checkCrawl(t, web, sk, true)
	assert.Zero(t, st.DeadLettered, "one lost lease round dead-lettered URLs (%d in the queue)", st.DeadQueued)
	assert.Zero(t, st.DeadQueued, "one lost lease round dead-lettered %d URLs: in the queue", st.DeadLettered)
	assert.Equal(t, int64(len(web.Pages())), st.Fetched, "fetched, the web has %d pages", len(web.Pages()))
	// Its leases expired, but the hung session itself stays: it pings.
	select {
	case <-hung.sess.Done():
		assert.Failf(t, "the hung session was closed", "the hung session was closed: %v", hung.sess.Err())
	default:
	}
	assert.Equal(t, int64(fleet+1), st.Sessions, "sessions at the scheduler, want the fleet's %d and the hung one", fleet)
	pls, _ := hung.pageLeases()
	assert.Len(t, pls, hosts, "the hung fetcher's page leases with credit for %d", hosts)
}

// 3b. The poison path: one URL whose lease is lost three times ends in the
// dead-letter queue, with the reason in its x-drover-error header.
func TestPoisonURLDeadLettered(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 5, Base: 34})
	sched := startScheduler(t, shortLeases(), seen.NewMemory())
	cfg := testCampaign(t, web)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	seed := cfg.Seeds[0]

	// Credit for the robots lease and three page leases.
	hung := startHung(t, sched.addr, cfg, 1+3)
	st := waitStats(t, ctl, cfg.ID, 40*time.Second, "poison URL dead-lettered", func(st session.Stats) bool {
		return st.DeadLettered == 1 && st.DeadQueued == 1 && st.Pending == 0
	})
	assert.Zero(t, st.Queued, "queued after dead-lettering: %+v", st)
	assert.Zero(t, st.InFlight, "in flight after dead-lettering: %+v", st)
	assert.Zero(t, st.Held, "held after dead-lettering: %+v", st)
	assert.Zero(t, st.Fetched, "fetched after dead-lettering: %+v", st)
	ls, _ := hung.pageLeases()
	assert.Len(t, ls, 3, "page leases")
	for _, l := range ls {
		assert.Equal(t, seed, l.URL, "leased URL, want only the seed")
	}
	assert.Zero(t, web.Count(seed), "%s requested", seed)

	d := getDead(t, sched.conn, cfg.ID, 1)[0]
	var m struct {
		U string `json:"u"`
	}
	if assert.NoError(t, json.Unmarshal(d.Body, &m), "dead-letter body %q", d.Body) {
		assert.Equal(t, seed, m.U, "dead-letter body %q: the URL", d.Body)
	}
	reason, _ := d.Headers["x-drover-error"].(string)
	assert.Contains(t, reason, "lease lost 3 times", "x-drover-error")
	assert.Contains(t, reason, "deadline", "x-drover-error")
}

// getDead takes n messages from the campaign's dead-letter queue (acked),
// within 10 s, and checks it holds no more.
func getDead(t *testing.T, conn *amqp.Connection, id string, n int) []amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var out []amqp.Delivery
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		d, ok, err := ch.Get(frontier.Topology{Campaign: id}.Dead(), false)
		require.NoError(t, err)
		if !ok {
			if time.Now().After(deadline) {
				require.FailNowf(t, "too few dead letters", "dead-letter queue: %d messages, want %d", len(out), n)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		out = append(out, d)
	}
	_, more, err := ch.Get(frontier.Topology{Campaign: id}.Dead(), false)
	assert.NoError(t, err, "dead-letter queue: get after %d messages", n)
	assert.False(t, more, "dead-letter queue holds more than %d messages", n)
	return out
}

// 4. Unreadable frontier messages (an unparseable URL, a body that is not
// JSON) are dead-lettered with the reason; the rest of the crawl completes.
func TestUnreadableMessagesDeadLettered(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 30, CrossHost: true, Base: 35})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)

	bodies := map[string]string{ // body -> what x-drover-error must say
		`{"u":"ht!tp://%%%"}`:       `unparseable URL "ht!tp://%%%"`,
		`not json`:                  "unreadable message",
		`{"u":""}`:                  "no url",
		`{"u":"ftp://example.com"}`: `unparseable URL "ftp://example.com"`,
	}
	topo := frontier.Topology{Campaign: cfg.ID}
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	require.NoError(t, topo.Declare(ch))
	require.NoError(t, ch.Confirm(false))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for body := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", topo.Shard(0), true, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
		require.NoError(t, err)
		ok, err := dc.WaitContext(ctx)
		require.NoError(t, err, "publish %q", body)
		require.True(t, ok, "publish %q: confirmed", body)
	}
	ch.Close()

	sk := sink.NewMemory()
	startFleet(t, cfg, []string{sched.addr}, sk, 2)
	st := waitDrained(t, []string{sched.addr}, cfg.ID, 2*time.Minute)
	checkCrawl(t, web, sk, true)
	assert.Equal(t, int64(len(web.Pages())), st.Fetched, "fetched, the web has %d pages", len(web.Pages()))
	assert.Equal(t, int64(len(bodies)), st.DeadLettered, "dead-lettered (%d queued)", st.DeadQueued)
	assert.Equal(t, int64(len(bodies)), st.DeadQueued, "dead-lettered queued (%d dead-lettered)", st.DeadLettered)
	for _, d := range getDead(t, sched.conn, cfg.ID, len(bodies)) {
		reason, _ := d.Headers["x-drover-error"].(string)
		var body string
		if string(d.Body) == "not json" {
			body = "not json"
		} else {
			var m struct {
				U string `json:"u"`
			}
			if !assert.NoError(t, json.Unmarshal(d.Body, &m), "dead-letter body %q", d.Body) {
				continue
			}
			b, _ := json.Marshal(m)
			body = strings.ReplaceAll(string(b), `\u0026`, "&")
		}
		want, ok := bodies[body]
		if !assert.True(t, ok, "unexpected dead letter %q (%q)", d.Body, reason) {
			continue
		}
		delete(bodies, body)
		assert.Contains(t, reason, want, "dead letter %q: x-drover-error", d.Body)
	}
	assert.Empty(t, bodies, "not dead-lettered")
	// The scheduler still serves.
	assert.Equal(t, int64(2), stats(t, ctl, cfg.ID).Sessions, "sessions after the bad messages")
}

// Closing a campaign with delete while its fetchers are still connected:
// the fetchers' sessions close; what they do next must not bring the
// campaign back (re-declare its queues, open a new actor).
func TestCloseCampaignWithFetchersConnected(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 10, Base: 36})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	ctl := control(t, sched.addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := ctl.Seed(ctx, cfg, cfg.Seeds)
	require.NoError(t, err, "seed")
	require.Equal(t, len(cfg.Seeds), n, "seed: URLs seeded")
	sk := sink.NewMemory()
	fl := startFleet(t, cfg, []string{sched.addr}, sk, 2)
	waitDrained(t, []string{sched.addr}, cfg.ID, time.Minute)
	checkCrawl(t, web, sk, true)
	_, err = ctl.CloseCampaign(ctx, cfg.ID, true)
	require.NoError(t, err)
	time.Sleep(time.Second) // the fleet re-dials within 100 ms
	st := stats(t, ctl, cfg.ID)
	fl.Stop()
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	_, qerr := ch.QueueDeclarePassive(frontier.Topology{Campaign: cfg.ID}.Shard(0), true, false, false, false, nil)
	if qerr == nil {
		ch.Close()
	}
	t.Logf("after close: sessions %d, queue exists %v, stats %+v", st.Sessions, qerr == nil, st)
	resurrected := st.Sessions > 0 || qerr == nil
	// Remove what a resurrection left behind.
	if _, err := ctl.CloseCampaign(ctx, cfg.ID, true); err != nil {
		t.Logf("second close: %v", err)
	}
	assert.False(t, resurrected, "a closed and deleted campaign came back: %d fetcher sessions on it 1 s after CloseCampaign(delete), shard queue exists: %v", st.Sessions, qerr == nil)
}
