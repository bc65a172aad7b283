package frontier_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/drover-crawl/drover/frontier"
)

// seenImpl opens a SeenStore; reopen (nil for a store that does not
// survive a restart) closes it and opens it again on the same data.
type seenImpl struct {
	name string
	open func(t *testing.T) (s frontier.SeenStore, reopen func(frontier.SeenStore) frontier.SeenStore)
}

func seenImpls() []seenImpl {
	return []seenImpl{
		{"memory", func(t *testing.T) (frontier.SeenStore, func(frontier.SeenStore) frontier.SeenStore) {
			return frontier.NewMemorySeen(), nil
		}},
		{"log", func(t *testing.T) (frontier.SeenStore, func(frontier.SeenStore) frontier.SeenStore) {
			dir := filepath.Join(t.TempDir(), "sub", "seen") // the directory is created
			open := func() frontier.SeenStore {
				s, err := frontier.OpenLogSeen(dir)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			var mu sync.Mutex
			cur := open()
			t.Cleanup(func() { mu.Lock(); cur.Close(); mu.Unlock() })
			return cur, func(old frontier.SeenStore) frontier.SeenStore {
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

func keys(prefix string, n int) []frontier.Key {
	out := make([]frontier.Key, n)
	for i := range out {
		out[i] = frontier.KeyOf(fmt.Sprintf("http://%s.example/%d", prefix, i))
	}
	return out
}

func wantQueued(t *testing.T, s frontier.SeenStore, c string, ks []frontier.Key, want ...bool) {
	t.Helper()
	got, err := s.Queued(c, ks)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Queued(%s) = %v, want %v", c, got, want)
	}
}

func wantDone(t *testing.T, s frontier.SeenStore, c string, k frontier.Key, want bool) {
	t.Helper()
	got, err := s.Done(c, k)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Done(%s, %x) = %v, want %v", c, k[:4], got, want)
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
			if err := s.MarkQueued("c1", []frontier.Key{a, c}); err != nil {
				t.Fatal(err)
			}
			wantQueued(t, s, "c1", k, true, false, true, false)
			wantDone(t, s, "c1", a, false)

			// Done counts as queued too; done without queued first.
			if err := s.MarkDone("c1", []frontier.Key{a, b}); err != nil {
				t.Fatal(err)
			}
			wantQueued(t, s, "c1", k, true, true, true, false)
			wantDone(t, s, "c1", a, true)
			wantDone(t, s, "c1", b, true)
			wantDone(t, s, "c1", c, false)

			// A done key stays done after MarkQueued (a link to a page
			// already fetched), and MarkDone is idempotent.
			if err := s.MarkQueued("c1", []frontier.Key{a, b, d}); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkDone("c1", []frontier.Key{b}); err != nil {
				t.Fatal(err)
			}
			wantDone(t, s, "c1", a, true)
			wantDone(t, s, "c1", b, true)
			wantDone(t, s, "c1", d, false)
			wantQueued(t, s, "c1", k, true, true, true, true)

			// Duplicate keys in one call.
			wantQueued(t, s, "c1", []frontier.Key{a, a, d}, true, true, true)

			// Campaigns are separate.
			wantQueued(t, s, "c2", k, false, false, false, false)
			wantDone(t, s, "c2", a, false)
			if err := s.MarkDone("c2", []frontier.Key{c}); err != nil {
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
			if err := s.MarkQueued("c1", []frontier.Key{d}); err != nil {
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
				ks := keys(fmt.Sprintf("w%d", w), per)
				got, err := s.Queued("c", ks)
				if err != nil {
					t.Fatal(err)
				}
				for i, k := range ks {
					if !got[i] {
						t.Fatalf("worker %d key %d not queued", w, i)
					}
					done, _ := s.Done("c", k)
					if want := i%20 < 10; done != want {
						t.Fatalf("worker %d key %d: done %v, want %v", w, i, done, want)
					}
				}
			}
		})
	}
}

func TestLogSeenSurvivesReopen(t *testing.T) {
	var impl seenImpl
	for _, i := range seenImpls() {
		if i.name == "log" {
			impl = i
		}
	}
	s, reopen := impl.open(t)
	k := keys("r", 3)
	if err := s.MarkQueued("c1", k); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDone("c1", k[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDone("c2", k[2:]); err != nil {
		t.Fatal(err)
	}
	s = reopen(s)
	wantQueued(t, s, "c1", k, true, true, true)
	wantDone(t, s, "c1", k[0], true)
	wantDone(t, s, "c1", k[1], false)
	wantDone(t, s, "c2", k[2], true)
	// MarkQueued after a restart still keeps done marks.
	if err := s.MarkQueued("c1", k); err != nil {
		t.Fatal(err)
	}
	wantDone(t, s, "c1", k[0], true)
	// A drop survives a restart too.
	if err := s.Drop("c1"); err != nil {
		t.Fatal(err)
	}
	s = reopen(s)
	wantQueued(t, s, "c1", k, false, false, false)
	wantDone(t, s, "c2", k[2], true)
}

func TestLogSeenLockedByAnother(t *testing.T) {
	dir := t.TempDir()
	s, err := frontier.OpenLogSeen(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := frontier.OpenLogSeen(dir); err == nil {
		s2.Close()
		t.Fatal("a second scheduler opened the same seen store")
	}
	s.Close()
	s3, err := frontier.OpenLogSeen(dir)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	s3.Close()
}

// TestLogSeenManyKeys crosses several memtable flushes and a merge, and
// checks every mark after a reopen.
func TestLogSeenManyKeys(t *testing.T) {
	dir := t.TempDir()
	s, err := frontier.OpenLogSeen(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10 * 65536
	all := keys("many", n)
	for i := 0; i < n; i += 1000 {
		if err := s.MarkQueued("c", all[i:min(i+1000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 2 {
		if err := s.MarkDone("c", all[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = frontier.OpenLogSeen(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, err := s.Queued("c", all)
	if err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if !q[i] {
			t.Fatalf("key %d lost", i)
		}
		if d, _ := s.Done("c", all[i]); d != (i%2 == 0) {
			t.Fatalf("key %d: done %v", i, d)
		}
	}
	if fresh, _ := s.Queued("c", keys("other", 1000)); slices.Contains(fresh, true) && countTrue(fresh) > 0 {
		t.Errorf("%d of 1000 unknown keys reported queued", countTrue(fresh))
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

// BenchmarkLogSeenMarkQueued marks 1,000,000 keys queued in batches of
// 1,000 and reports the bytes per key on disk. Run it once:
// go test -run '^$' -bench LogSeen -benchtime 1x ./frontier/
func BenchmarkLogSeenMarkQueued(b *testing.B) {
	const total, batch = 1_000_000, 1_000
	all := make([]frontier.Key, total)
	for i := range all {
		all[i] = frontier.KeyOf(fmt.Sprintf("http://host%d.example.com/page/%d?q=%d", i%5000, i, i*7))
	}
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		s, err := frontier.OpenLogSeen(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for i := 0; i < total; i += batch {
			if err := s.MarkQueued("bench", all[i:i+batch]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(s.DiskBytes())/total, "bytes/key")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
