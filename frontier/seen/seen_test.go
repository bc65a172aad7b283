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
				if err := old.Close(); err != nil {
					t.Fatal(err)
				}
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
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Queued(%s) = %v, want %v", c, got, want)
	}
}

func wantDone(t *testing.T, s seen.Store, c string, k seen.Key, want bool) {
	t.Helper()
	got, err := s.Done(c, k)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Done(%s, %x) = %v, want %v", c, k[:4], got, want)
	}
}

// wantMarks stops the test unless every key of ks is queued in campaign
// c of s, and done exactly where done(i) says; what names the keys.
func wantMarks(t *testing.T, s seen.Store, c string, ks []seen.Key, done func(i int) bool, what string) {
	t.Helper()
	q, err := s.Queued(c, ks)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range ks {
		d, err := s.Done(c, k)
		if err != nil {
			t.Fatal(err)
		}
		if !q[i] || d != done(i) {
			t.Fatalf("%s key %d: queued %v done %v, want queued true done %v", what, i, q[i], d, done(i))
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
				t.Errorf("Queued of no keys: %v, %v", got, err)
			}
			if err := s.MarkQueued("c1", nil); err != nil {
				t.Errorf("MarkQueued of no keys: %v", err)
			}

			// Queued is not done.
			if err := s.MarkQueued("c1", []seen.Key{a, c}); err != nil {
				t.Fatal(err)
			}
			wantQueued(t, s, "c1", k, true, false, true, false)
			wantDone(t, s, "c1", a, false)

			// Done counts as queued too; done without queued first.
			if err := s.MarkDone("c1", []seen.Key{a, b}); err != nil {
				t.Fatal(err)
			}
			wantQueued(t, s, "c1", k, true, true, true, false)
			wantDone(t, s, "c1", a, true)
			wantDone(t, s, "c1", b, true)
			wantDone(t, s, "c1", c, false)

			// A done key stays done after MarkQueued (a link to a page
			// already fetched), and MarkDone is idempotent.
			if err := s.MarkQueued("c1", []seen.Key{a, b, d}); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkDone("c1", []seen.Key{b}); err != nil {
				t.Fatal(err)
			}
			wantDone(t, s, "c1", a, true)
			wantDone(t, s, "c1", b, true)
			wantDone(t, s, "c1", d, false)
			wantQueued(t, s, "c1", k, true, true, true, true)

			// Duplicate keys in one call.
			wantQueued(t, s, "c1", []seen.Key{a, a, d}, true, true, true)

			// Campaigns are separate.
			wantQueued(t, s, "c2", k, false, false, false, false)
			wantDone(t, s, "c2", a, false)
			if err := s.MarkDone("c2", []seen.Key{c}); err != nil {
				t.Fatal(err)
			}
			wantDone(t, s, "c2", c, true)
			wantDone(t, s, "c1", c, false)

			// Drop forgets one campaign only; dropping an unknown one is fine.
			if err := s.Drop("c1"); err != nil {
				t.Fatal(err)
			}
			if err := s.Drop("never-seen"); err != nil {
				t.Errorf("drop of an unknown campaign: %v", err)
			}
			wantQueued(t, s, "c1", k, false, false, false, false)
			wantDone(t, s, "c1", a, false)
			wantDone(t, s, "c2", c, true)

			// A dropped campaign can be marked again.
			if err := s.MarkQueued("c1", []seen.Key{d}); err != nil {
				t.Fatal(err)
			}
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
				t.Fatal(err)
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
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("Failures(%s, %q) = %+v, want %+v", c, reason, got, want)
				}
				for i := range want {
					if !got[i].First.Equal(want[i].First) || !got[i].Last.Equal(want[i].Last) {
						t.Errorf("Failures(%s, %q)[%d] times = %v..%v, want %v..%v", c, reason, i, got[i].First, got[i].Last, want[i].First, want[i].Last)
					}
					got[i].First, got[i].Last, want[i].First, want[i].Last = time.Time{}, time.Time{}, time.Time{}, time.Time{}
					if got[i] != want[i] {
						t.Errorf("Failures(%s, %q)[%d] = %+v, want %+v", c, reason, i, got[i], want[i])
					}
				}
			}
			wantFailures("c1", "")
			if err := s.RecordFailures("c1", nil); err != nil {
				t.Errorf("RecordFailures of none: %v", err)
			}
			a := failure.Record{URL: "http://a.example/", Reason: "host_down", Attempts: 3, LastError: "dial: refused", First: t0, Last: t0.Add(time.Minute)}
			b := failure.Record{URL: "http://b.example/x", Reason: "robots", Attempts: 1, LastError: "disallowed", First: t0, Last: t0}
			if err := s.RecordFailures("c1", []failure.Record{b, a}); err != nil {
				t.Fatal(err)
			}
			wantFailures("c1", "", a, b) // sorted by URL
			wantFailures("c1", "robots", b)
			wantFailures("c1", "nope")
			wantFailures("c2", "")

			// Again: attempts, last, last error and reason are the new
			// ones; first is kept, also within one call.
			a2 := failure.Record{URL: a.URL, Reason: "dns", Attempts: 5, LastError: "no such host", First: t0.Add(time.Hour), Last: t0.Add(2 * time.Hour)}
			a3 := a2
			a3.Attempts, a3.Last = 6, t0.Add(3*time.Hour)
			if err := s.RecordFailures("c1", []failure.Record{a2, a3}); err != nil {
				t.Fatal(err)
			}
			want := a3
			want.First = t0
			wantFailures("c1", "", want, b)
			wantFailures("c1", "host_down")

			// Drop forgets the marks and keeps the failures; DropFailures
			// forgets the failures of one campaign only.
			if err := s.MarkDone("c1", keys("f", 2)); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordFailures("c2", []failure.Record{b}); err != nil {
				t.Fatal(err)
			}
			if err := s.Drop("c1"); err != nil {
				t.Fatal(err)
			}
			wantQueued(t, s, "c1", keys("f", 2), false, false)
			wantFailures("c1", "", want, b)
			if reopen != nil {
				s = reopen(s)
				wantFailures("c1", "", want, b)
			}
			if err := s.DropFailures("c1"); err != nil {
				t.Fatal(err)
			}
			wantFailures("c1", "")
			wantFailures("c2", "", b)
			if err := s.DropFailures("never-seen"); err != nil {
				t.Errorf("DropFailures of an unknown campaign: %v", err)
			}
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
				if err := s.MarkDone(c, k); err != nil {
					t.Fatal(err)
				}
				if err := s.RecordFailures(c, []failure.Record{{URL: "http://x.example/", Reason: "r"}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Drop("c"); err != nil {
				t.Fatal(err)
			}
			if err := s.DropFailures("c"); err != nil {
				t.Fatal(err)
			}
			wantQueued(t, s, "c", k, false, false, false)
			for _, c := range []string{"c1", "c-2", "b"} {
				wantQueued(t, s, c, k, true, true, true)
				if fs, err := s.Failures(c, ""); err != nil || len(fs) != 1 {
					t.Errorf("Failures(%s) = %v, %v after dropping c", c, fs, err)
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
				if err := s.MarkDone(c, k); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.RecordFailures("c~3c", []failure.Record{{URL: "http://x.example/", Reason: "r"}}); err != nil {
				t.Fatal(err)
			}
			want := func(want ...string) {
				t.Helper()
				got, err := s.Campaigns("c", "~")
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("Campaigns(c) = %q, %v; want %q", got, err, want)
				}
			}
			want("c", "c~1a", "c~2b", "c~3c")
			if err := s.Drop("c~1a"); err != nil {
				t.Fatal(err)
			}
			want("c", "c~2b", "c~3c")
			if err := s.DropFailures("c~3c"); err != nil {
				t.Fatal(err)
			}
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
			if err := s.SetHistory("news", k[:2], [][]byte{[]byte("a"), []byte("b")}); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkDone("news", k); err != nil {
				t.Fatal(err)
			}
			if err := s.Drop("news"); err != nil {
				t.Fatal(err)
			}
			want := map[int]string{0: "a", 1: "b", 2: ""}
			for i, w := range want {
				if h, err := s.History("news", k[i]); err != nil || string(h) != w {
					t.Errorf("history %d: %q, %v; want %q", i, h, err, w)
				}
			}
			if h, err := s.History("news2", k[0]); err != nil || h != nil {
				t.Errorf("another lineage reads %q, %v", h, err)
			}
			if cs, err := s.Campaigns("news", "~"); err != nil || len(cs) != 0 {
				t.Errorf("a history is listed as a campaign: %v, %v", cs, err)
			}
			if err := s.SetHistory("news", k[:1], [][]byte{[]byte("a2")}); err != nil {
				t.Fatal(err)
			}
			if h, _ := s.History("news", k[0]); string(h) != "a2" {
				t.Errorf("history replaced: %q, want a2", h)
			}
			if err := s.DropHistory("news"); err != nil {
				t.Fatal(err)
			}
			if h, err := s.History("news", k[1]); err != nil || h != nil {
				t.Errorf("history after DropHistory: %q, %v", h, err)
			}
		})
	}
}
