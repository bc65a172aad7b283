package session

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeScheduler accepts one fetcher session on a loopback listener,
// welcomes it as scheduler "fake" of the campaign's incarnation
// (FrameRecorded when the incarnation is not 0 and the hello asks), and
// hands the test every outcome it reads.
type fakeScheduler struct {
	addr     string
	outcomes chan Outcome
	fw       chan *FrameWriter
}

func startFakeScheduler(t *testing.T, incarnation uint64) *fakeScheduler {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	fs := &fakeScheduler{addr: ln.Addr().String(), outcomes: make(chan Outcome, 64), fw: make(chan *FrameWriter, 1)}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close() })
		fr, fw := NewFrameReader(c), NewFrameWriter(c)
		var hello Hello
		if tp, p, err := fr.ReadFrame(); err != nil || Decode(tp, p, &hello) != nil {
			return
		}
		w := Welcome{Version: ProtocolVersion, Scheduler: "fake", KeepAlive: time.Minute, LeaseTimeout: time.Minute}
		if incarnation != 0 && hello.Recorded {
			w.Recorded, w.Incarnation = true, incarnation
		}
		if fw.WriteFrame(FrameWelcome, w) != nil || fw.Flush() != nil {
			return
		}
		fs.fw <- fw
		for {
			tp, p, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if tp != FrameOutcomes {
				continue
			}
			var os Outcomes
			if Decode(tp, p, &os) != nil {
				return
			}
			for _, o := range os.Items {
				fs.outcomes <- o
			}
		}
	}()
	return fs
}

// next is the next outcome the scheduler read.
func (fs *fakeScheduler) next(t *testing.T) Outcome {
	t.Helper()
	select {
	case o := <-fs.outcomes:
		return o
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no outcome within 10s")
	}
	return Outcome{}
}

// recorded sends FrameRecorded for leases (only the test goroutine writes
// once the session is welcomed).
func (fs *fakeScheduler) recorded(t *testing.T, leases ...uint64) {
	t.Helper()
	fw := <-fs.fw
	defer func() { fs.fw <- fw }()
	require.NoError(t, fw.WriteFrame(FrameRecorded, Recorded{Leases: leases}))
	require.NoError(t, fw.Flush())
}

func links(urls ...string) []urlrule.Link {
	var ls []urlrule.Link
	for _, u := range urls {
		ls = append(ls, urlrule.Link{URL: "http://127.0.0.1:9/" + u})
	}
	return ls
}

func linkNames(ls []urlrule.Link) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.URL[len("http://127.0.0.1:9/"):])
	}
	return out
}

func dialKnown(t *testing.T, fs *fakeScheduler, known *KnownLinks) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := campaign.Config{ID: "known"}
	sess, err := Client{Token: DevToken, Known: known}.DialSession(ctx, fs.addr, "fetcher-0", cfg, 4)
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	return sess
}

// waitKnown waits until known holds n links.
func waitKnown(t *testing.T, known *KnownLinks, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for known.Len() != n {
		if time.Now().After(deadline) {
			require.FailNow(t, fmt.Sprintf("known links: %d, want %d", known.Len(), n))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func checkOutcome(t *testing.T, o Outcome, lease uint64, want []string, wantKnown int) {
	t.Helper()
	if got := linkNames(o.Links); o.LeaseID != lease || !slices.Equal(got, want) || o.Known != wantKnown {
		require.FailNow(t, fmt.Sprintf("outcome of lease %d carried links %v, known %d; want lease %d, links %v, known %d", o.LeaseID, got, o.Known, lease, want, wantKnown))
	}
}

// A session leaves out of its outcomes the links of outcomes the scheduler
// said were recorded, and only those: not the links of an outcome merely
// reported, nor of one the scheduler never confirmed.
func TestKnownLinksLeftOutOnceRecorded(t *testing.T) {
	fs := startFakeScheduler(t, 1)
	known := NewKnownLinks(0)
	sess := dialKnown(t, fs, known)

	sess.Report(Outcome{LeaseID: 1, Links: links("a", "b")})
	checkOutcome(t, fs.next(t), 1, []string{"a", "b"}, 0)
	// Reported, not recorded: sent again.
	sess.Report(Outcome{LeaseID: 2, Links: links("a", "b", "c")})
	checkOutcome(t, fs.next(t), 2, []string{"a", "b", "c"}, 0)

	fs.recorded(t, 1)
	waitKnown(t, known, 2)
	mine := links("a", "b", "c", "d")
	sess.Report(Outcome{LeaseID: 3, Links: mine})
	checkOutcome(t, fs.next(t), 3, []string{"c", "d"}, 2)
	require.Equal(t, []string{"a", "b", "c", "d"}, linkNames(mine), "Report changed the caller's links")

	// Lease 2 recorded: c is known now; d (lease 3) is not.
	fs.recorded(t, 2)
	waitKnown(t, known, 3)
	sess.Report(Outcome{LeaseID: 4, Links: links("c", "d")})
	checkOutcome(t, fs.next(t), 4, []string{"d"}, 1)
}

// learn teaches known, through a session to a scheduler of incarnation,
// the links of one outcome the scheduler recorded.
func learn(t *testing.T, known *KnownLinks, incarnation uint64, names ...string) {
	t.Helper()
	fs := startFakeScheduler(t, incarnation)
	sess := dialKnown(t, fs, known)
	before := known.Len()
	sess.Report(Outcome{LeaseID: 1, Links: links(names...)})
	fs.next(t)
	fs.recorded(t, 1)
	waitKnown(t, known, before+len(names))
	sess.Close()
}

// reportAB reports links a and b, under lease 1, through a new session
// sharing known to a scheduler of incarnation, and returns the outcome the
// scheduler read.
func reportAB(t *testing.T, known *KnownLinks, incarnation uint64) Outcome {
	t.Helper()
	fs := startFakeScheduler(t, incarnation)
	sess := dialKnown(t, fs, known)
	defer sess.Close()
	sess.Report(Outcome{LeaseID: 1, Links: links("a", "b")})
	return fs.next(t)
}

// A scheduler that does not offer FrameRecorded gets every link: the
// session cannot learn what it recorded.
func TestKnownLinksNeedTheSchedulersWord(t *testing.T) {
	known := NewKnownLinks(0)
	learn(t, known, 7, "a")
	checkOutcome(t, reportAB(t, known, 0), 1, []string{"a", "b"}, 0)
}

// What a scheduler's campaign recorded holds for that incarnation only: a
// session to the same scheduler in the same incarnation leaves the link
// out, one to the campaign opened again there (deleted and started anew,
// or the scheduler restarted) reports it.
func TestKnownLinksHoldForOneIncarnation(t *testing.T) {
	known := NewKnownLinks(0)
	learn(t, known, 7, "a")
	checkOutcome(t, reportAB(t, known, 7), 1, []string{"b"}, 1)
	checkOutcome(t, reportAB(t, known, 8), 1, []string{"a", "b"}, 0)
}

// The cache holds at most two generations a scheduler; a link used again
// survives the roll that drops its generation.
func TestKnownLinksBounded(t *testing.T) {
	k := NewKnownLinks(4)
	sc := knownScope{scheduler: "s", incarnation: 1}
	known := func(u string) bool {
		_, _, n := k.filter(sc, []urlrule.Link{{URL: u}})
		return n == 1
	}
	require.False(t, known("http://h/x"), "an unknown link was left out") // and the scope's set is made
	key := func(i int) linkKey { return k.key(fmt.Sprintf("http://h/%d", i)) }
	for i := range 4 {
		k.add(sc, []linkKey{key(i)})
	}
	// 0-3 are the old generation now; using 0 keeps it.
	require.True(t, known("http://h/0"), "a known link was kept")
	for i := 4; i < 100; i++ {
		k.add(sc, []linkKey{key(i)})
		require.LessOrEqual(t, k.Len(), 8, "links held, bound 8")
	}
	require.False(t, known("http://h/1"), "a link two generations old is still known")
	require.True(t, known("http://h/99"), "the latest link is not known")
}

// A rules frame the session did not ask for, or whose welcome did not
// offer it (this fake scheduler never does), ends the session as a bad
// frame, whether or not the client takes pushed rules.
func TestRulesFrameNotAskedForEndsTheSession(t *testing.T) {
	for _, takes := range []bool{false, true} {
		fs := startFakeScheduler(t, 0)
		var took []campaign.Rules
		cl := Client{Token: "t"}
		if takes {
			cl.Rules = func(r campaign.Rules) error { took = append(took, r); return nil }
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := cl.DialSession(ctx, fs.addr, "c", campaign.Config{ID: "c"}, 1)
		require.NoError(t, err)
		fw := <-fs.fw
		require.NoError(t, fw.WriteFrame(FrameRules, campaign.Rules{Version: 1, Include: []string{"x"}}))
		require.NoError(t, fw.Flush())
		select {
		case <-s.Done():
		case <-ctx.Done():
			require.FailNow(t, fmt.Sprintf("takes rules %v: the session still runs after a rules frame it did not ask for", takes))
		}
		assert.ErrorIsf(t, s.Err(), ErrBadFrame, "takes rules %v: session ended", takes)
		assert.Emptyf(t, took, "takes rules %v: rules taken", takes)
	}
}
