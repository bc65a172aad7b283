package seen_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seenImpl opens a Store; reopen (nil for a store that does not
// survive a restart) closes it and opens it again on the same data.
type seenImpl struct {
	name string
	open func(t *testing.T) (s seen.Store, reopen func(seen.Store) seen.Store)
}

func seenImpls() []seenImpl {
	return []seenImpl{
		{"memory", func(t *testing.T) (seen.Store, func(seen.Store) seen.Store) {
			return seen.NewMemory(), nil
		}},
		{"pebble", func(t *testing.T) (seen.Store, func(seen.Store) seen.Store) {
			dir := filepath.Join(t.TempDir(), "sub", "seen") // the directory is created
			open := func() seen.Store { return openPebble(t, dir) }
			var mu sync.Mutex
			cur := open()
			t.Cleanup(func() { mu.Lock(); cur.Close(); mu.Unlock() })
			return cur, func(old seen.Store) seen.Store {
				mu.Lock()
				defer mu.Unlock()
				require.NoError(t, old.Close())
				cur = open()
				return cur
			}
		}},
	}
}

// seenImplNamed returns the implementation of that name.
func seenImplNamed(name string) seenImpl {
	for _, i := range seenImpls() {
		if i.name == name {
			return i
		}
	}
	panic(name)
}

func openPebble(t testing.TB, dir string) *seen.Pebble {
	t.Helper()
	s, err := seen.OpenPebble(dir, seen.PebbleOptions{Log: testLog(t)})
	require.NoError(t, err)
	return s
}

// testLog logs to the test's log, so that the store's loud messages show
// with -v or on failure.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func keys(prefix string, n int) []seen.Key {
	out := make([]seen.Key, n)
	for i := range out {
		out[i] = seen.KeyOf(fmt.Sprintf("http://%s.example/%d", prefix, i))
	}
	return out
}

func wantQueued(t *testing.T, s seen.Store, c string, ks []seen.Key, want ...bool) {
	t.Helper()
	got, err := s.Queued(c, ks)
	require.NoError(t, err)
	assert.Truef(t, slices.Equal(got, want), "Queued(%s) = %v, want %v", c, got, want)
}

func wantDone(t *testing.T, s seen.Store, c string, k seen.Key, want bool) {
	t.Helper()
	got, err := s.Done(c, k)
	require.NoError(t, err)
	assert.Equalf(t, want, got, "Done(%s, %x)", c, k[:4])
}

// wantMarks stops the test unless every key of ks is queued in campaign
// c of s, and done exactly where done(i) says; what names the keys.
func wantMarks(t *testing.T, s seen.Store, c string, ks []seen.Key, done func(i int) bool, what string) {
	t.Helper()
	q, err := s.Queued(c, ks)
	require.NoError(t, err)
	for i, k := range ks {
		d, err := s.Done(c, k)
		require.NoError(t, err)
		if !q[i] || d != done(i) {
			require.FailNow(t, fmt.Sprintf("%s key %d: queued %v done %v, want queued true done %v", what, i, q[i], d, done(i)))
		}
	}
}

func TestSeenStoreSemantics(t *testing.T) {
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, _ := impl.open(t)
			k := keys("a", 4)
			a, b, c, d := k[0], k[1], k[2], k[3]

			// Nothing is marked in a campaign never seen.
			wantQueued(t, s, "c1", k, false, false, false, false)
			wantDone(t, s, "c1", a, false)
			if got, err := s.Queued("c1", nil); err != nil || len(got) != 0 {
				assert.Fail(t, fmt.Sprintf("Queued of no keys: %v, %v", got, err))
			}
			assert.NoError(t, s.MarkQueued("c1", nil), "MarkQueued of no keys")

			// Queued is not done.
			require.NoError(t, s.MarkQueued("c1", []seen.Key{a, c}))
			wantQueued(t, s, "c1", k, true, false, true, false)
			wantDone(t, s, "c1", a, false)

			// Done counts as queued too; done without queued first.
			require.NoError(t, s.MarkDone("c1", []seen.Key{a, b}))
			wantQueued(t, s, "c1", k, true, true, true, false)
			wantDone(t, s, "c1", a, true)
			wantDone(t, s, "c1", b, true)
			wantDone(t, s, "c1", c, false)

			// A done key stays done after MarkQueued (a link to a page
			// already fetched), and MarkDone is idempotent.
			require.NoError(t, s.MarkQueued("c1", []seen.Key{a, b, d}))
			require.NoError(t, s.MarkDone("c1", []seen.Key{b}))
			wantDone(t, s, "c1", a, true)
			wantDone(t, s, "c1", b, true)
			wantDone(t, s, "c1", d, false)
			wantQueued(t, s, "c1", k, true, true, true, true)

			// Duplicate keys in one call.
			wantQueued(t, s, "c1", []seen.Key{a, a, d}, true, true, true)

			// Campaigns are separate.
			wantQueued(t, s, "c2", k, false, false, false, false)
			wantDone(t, s, "c2", a, false)
			require.NoError(t, s.MarkDone("c2", []seen.Key{c}))
			wantDone(t, s, "c2", c, true)
			wantDone(t, s, "c1", c, false)

			// Drop forgets one campaign only; dropping an unknown one is fine.
			require.NoError(t, s.Drop("c1"))
			assert.NoError(t, s.Drop("never-seen"), "drop of an unknown campaign")
			wantQueued(t, s, "c1", k, false, false, false, false)
			wantDone(t, s, "c1", a, false)
			wantDone(t, s, "c2", c, true)

			// A dropped campaign can be marked again.
			require.NoError(t, s.MarkQueued("c1", []seen.Key{d}))
			wantQueued(t, s, "c1", k, false, false, false, true)
		})
	}
}

func TestSeenStoreConcurrent(t *testing.T) {
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, _ := impl.open(t)
			const workers, per = 8, 200
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					ks := keys(fmt.Sprintf("w%d", w), per)
					for i := 0; i < per; i += 20 {
						if err := s.MarkQueued("c", ks[i:i+20]); err != nil {
							errs <- err
							return
						}
						if err := s.MarkDone("c", ks[i:i+10]); err != nil {
							errs <- err
							return
						}
						if _, err := s.Queued("c", ks[:i+20]); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for w := range workers {
				wantMarks(t, s, "c", keys(fmt.Sprintf("w%d", w), per), func(i int) bool { return i%20 < 10 }, fmt.Sprintf("worker %d", w))
			}
		})
	}
}

func TestSeenStoreFailures(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, reopen := impl.open(t)
			wantFailures := func(c, reason string, want ...failure.Record) {
				t.Helper()
				got, err := s.Failures(c, reason)
				require.NoError(t, err)
				require.Lenf(t, got, len(want), "Failures(%s, %q) = %+v, want %+v", c, reason, got, want)
				for i := range want {
					if !got[i].First.Equal(want[i].First) || !got[i].Last.Equal(want[i].Last) {
						assert.Fail(t, fmt.Sprintf("Failures(%s, %q)[%d] times = %v..%v, want %v..%v", c, reason, i, got[i].First, got[i].Last, want[i].First, want[i].Last))
					}
					got[i].First, got[i].Last, want[i].First, want[i].Last = time.Time{}, time.Time{}, time.Time{}, time.Time{}
					assert.Equalf(t, want[i], got[i], "Failures(%s, %q)[%d]", c, reason, i)
				}
			}
			wantFailures("c1", "")
			assert.NoError(t, s.RecordFailures("c1", nil), "RecordFailures of none")
			a := failure.Record{URL: "http://a.example/", Reason: "host_down", Attempts: 3, LastError: "dial: refused", First: t0, Last: t0.Add(time.Minute)}
			b := failure.Record{URL: "http://b.example/x", Reason: "robots", Attempts: 1, LastError: "disallowed", First: t0, Last: t0}
			require.NoError(t, s.RecordFailures("c1", []failure.Record{b, a}))
			wantFailures("c1", "", a, b) // sorted by URL
			wantFailures("c1", "robots", b)
			wantFailures("c1", "nope")
			wantFailures("c2", "")

			// Again: attempts, last, last error and reason are the new
			// ones; first is kept, also within one call.
			a2 := failure.Record{URL: a.URL, Reason: "dns", Attempts: 5, LastError: "no such host", First: t0.Add(time.Hour), Last: t0.Add(2 * time.Hour)}
			a3 := a2
			a3.Attempts, a3.Last = 6, t0.Add(3*time.Hour)
			require.NoError(t, s.RecordFailures("c1", []failure.Record{a2, a3}))
			want := a3
			want.First = t0
			wantFailures("c1", "", want, b)
			wantFailures("c1", "host_down")

			// Drop forgets the marks and keeps the failures; DropFailures
			// forgets the failures of one campaign only.
			require.NoError(t, s.MarkDone("c1", keys("f", 2)))
			require.NoError(t, s.RecordFailures("c2", []failure.Record{b}))
			require.NoError(t, s.Drop("c1"))
			wantQueued(t, s, "c1", keys("f", 2), false, false)
			wantFailures("c1", "", want, b)
			if reopen != nil {
				s = reopen(s)
				wantFailures("c1", "", want, b)
			}
			require.NoError(t, s.DropFailures("c1"))
			wantFailures("c1", "")
			wantFailures("c2", "", b)
			assert.NoError(t, s.DropFailures("never-seen"), "DropFailures of an unknown campaign")
		})
	}
}

// TestSeenStoreDropPrefix: a campaign whose ID is another's prefix keeps
// its marks and failures when the shorter one is dropped.
func TestSeenStoreDropPrefix(t *testing.T) {
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, _ := impl.open(t)
			k := keys("p", 3)
			for _, c := range []string{"c", "c1", "c-2", "b"} {
				require.NoError(t, s.MarkDone(c, k))
				require.NoError(t, s.RecordFailures(c, []failure.Record{{URL: "http://x.example/", Reason: "r"}}))
			}
			require.NoError(t, s.Drop("c"))
			require.NoError(t, s.DropFailures("c"))
			wantQueued(t, s, "c", k, false, false, false)
			for _, c := range []string{"c1", "c-2", "b"} {
				wantQueued(t, s, c, k, true, true, true)
				if fs, err := s.Failures(c, ""); err != nil || len(fs) != 1 {
					assert.Fail(t, fmt.Sprintf("Failures(%s) = %v, %v after dropping c", c, fs, err))
				}
			}
		})
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// TestSeenStoreCampaigns: the runs of one campaign ID a store knows, by
// their marks or their failure records, and nothing of another ID that
// shares a prefix; a run dropped of both is gone, and the list survives a
// restart.
func TestSeenStoreCampaigns(t *testing.T) {
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, reopen := impl.open(t)
			k := keys("p", 3)
			for _, c := range []string{"c", "c~1a", "c~2b", "c1", "c.x~3", "b~1"} {
				require.NoError(t, s.MarkDone(c, k))
			}
			require.NoError(t, s.RecordFailures("c~3c", []failure.Record{{URL: "http://x.example/", Reason: "r"}}))
			want := func(want ...string) {
				t.Helper()
				got, err := s.Campaigns("c", "~")
				if err != nil || !slices.Equal(got, want) {
					assert.Fail(t, fmt.Sprintf("Campaigns(c) = %q, %v; want %q", got, err, want))
				}
			}
			want("c", "c~1a", "c~2b", "c~3c")
			require.NoError(t, s.Drop("c~1a"))
			want("c", "c~2b", "c~3c")
			require.NoError(t, s.DropFailures("c~3c"))
			want("c", "c~2b")
			if reopen != nil {
				s = reopen(s)
				want("c", "c~2b")
			}
		})
	}
}

// A lineage's history reads back, outlives Drop of the run of the same
// name, is its own (another lineage sees none), and goes with DropHistory.
func TestSeenStoreHistory(t *testing.T) {
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, _ := impl.open(t)
			k := keys("h", 3)
			require.NoError(t, s.SetHistory("news", k[:2], [][]byte{[]byte("a"), []byte("b")}))
			require.NoError(t, s.MarkDone("news", k))
			require.NoError(t, s.Drop("news"))
			want := map[int]string{0: "a", 1: "b", 2: ""}
			for i, w := range want {
				if h, err := s.History("news", k[i]); err != nil || string(h) != w {
					assert.Fail(t, fmt.Sprintf("history %d: %q, %v; want %q", i, h, err, w))
				}
			}
			if h, err := s.History("news2", k[0]); err != nil || h != nil {
				assert.Fail(t, fmt.Sprintf("another lineage reads %q, %v", h, err))
			}
			if cs, err := s.Campaigns("news", "~"); err != nil || len(cs) != 0 {
				assert.Fail(t, fmt.Sprintf("a history is listed as a campaign: %v, %v", cs, err))
			}
			require.NoError(t, s.SetHistory("news", k[:1], [][]byte{[]byte("a2")}))
			h, _ := s.History("news", k[0])
			assert.Equal(t, "a2", string(h), "history replaced")
			require.NoError(t, s.DropHistory("news"))
			if h, err := s.History("news", k[1]); err != nil || h != nil {
				assert.Fail(t, fmt.Sprintf("history after DropHistory: %q, %v", h, err))
			}
		})
	}
}
