package seen_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/frontier/seen/seentest"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPebbleSeenSurvivesReopen(t *testing.T) {
	s, reopen := seenImplNamed("pebble").open(t)
	k := keys("r", 3)
	require.NoError(t, s.MarkQueued("c1", k))
	require.NoError(t, s.MarkDone("c1", k[:1]))
	require.NoError(t, s.MarkDone("c2", k[2:]))
	s = reopen(s)
	wantQueued(t, s, "c1", k, true, true, true)
	wantDone(t, s, "c1", k[0], true)
	wantDone(t, s, "c1", k[1], false)
	wantDone(t, s, "c2", k[2], true)
	// MarkQueued after a restart still keeps done marks.
	require.NoError(t, s.MarkQueued("c1", k))
	wantDone(t, s, "c1", k[0], true)
	// A drop survives a restart too.
	require.NoError(t, s.Drop("c1"))
	s = reopen(s)
	wantQueued(t, s, "c1", k, false, false, false)
	wantDone(t, s, "c2", k[2], true)
}

func TestPebbleSeenLockedByAnother(t *testing.T) {
	dir := t.TempDir()
	s := openPebble(t, dir)
	if s2, err := seen.OpenPebble(dir, seen.PebbleOptions{}); err == nil {
		s2.Close()
		require.FailNow(t, "a second scheduler opened the same seen store")
	}
	s.Close()
	// The refused open moved nothing aside.
	aside, _ := filepath.Glob(filepath.Join(dir, "pebble.damaged-*"))
	assert.Empty(t, aside, "a locked store was moved aside")
	openPebble(t, dir).Close()
}

// TestPebbleSeenManyKeys crosses several memtable flushes and compactions,
// and checks every mark after a reopen.
func TestPebbleSeenManyKeys(t *testing.T) {
	dir := t.TempDir()
	s := openPebble(t, dir)
	const n = 150_000
	all := keys("many", n)
	for i := 0; i < n; i += 1000 {
		require.NoError(t, s.MarkQueued("c", all[i:i+1000]))
	}
	even := make([]seen.Key, 0, n/2)
	for i := 0; i < n; i += 2 {
		even = append(even, all[i])
	}
	for i := 0; i < len(even); i += 1000 {
		require.NoError(t, s.MarkDone("c", even[i:min(i+1000, len(even))]))
	}
	s.Close()
	s = openPebble(t, dir)
	defer s.Close()
	q, err := s.Queued("c", all)
	require.NoError(t, err)
	for i := range all {
		require.Truef(t, q[i], "key %d lost", i)
		if i%5 != 0 {
			continue
		}
		d, _ := s.Done("c", all[i])
		require.Equalf(t, i%2 == 0, d, "key %d: done", i)
	}
	fresh, _ := s.Queued("c", keys("other", 1000))
	assert.Zero(t, countTrue(fresh), "of 1000 unknown keys, this many reported queued")
}

// TestPebbleSeenSurvivesKill: marks whose MarkQueued/MarkDone returned are
// there after the process is SIGKILLed without closing the store.
func TestPebbleSeenSurvivesKill(t *testing.T) {
	const batches, per = 50, 100
	if dir := os.Getenv("DROVER_SEEN_KILL_DIR"); dir != "" {
		s, err := seen.OpenPebble(dir, seen.PebbleOptions{})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		for b := range batches {
			ks := keys(fmt.Sprintf("kill%d", b), per)
			if err := s.MarkQueued("c", ks); err != nil {
				fmt.Println("mark:", err)
				os.Exit(2)
			}
			if err := s.MarkDone("c", ks[:per/2]); err != nil {
				fmt.Println("mark:", err)
				os.Exit(2)
			}
			fmt.Printf("marked %d\n", b)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPebbleSeenSurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DROVER_SEEN_KILL_DIR="+dir)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		require.FailNow(t, fmt.Sprintf("child: %v\n%s", err, out))
	}
	marked := -1
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "marked "); ok {
			marked, _ = strconv.Atoi(n)
		}
	}
	require.Equalf(t, batches-1, marked, "the last batch the child marked:\n%s", out)
	s := openPebble(t, dir)
	defer s.Close()
	for b := range batches {
		wantMarks(t, s, "c", keys(fmt.Sprintf("kill%d", b), per), func(i int) bool { return i < per/2 }, fmt.Sprintf("after SIGKILL, batch %d", b))
	}
}

// TestPebbleSeenDamaged truncates, scrambles and removes the files of a
// closed store in many ways, then reopens it: it must open (moving a store
// it cannot open aside), answer without an error, never call a key it was
// not given seen, and take and keep new marks. Unknown means "not seen".
func TestPebbleSeenDamaged(t *testing.T) {
	testenv.Slow(t) // a 120,000-key store, damaged and reopened many times
	// A store with sstables in several levels, a WAL, a manifest, and some
	// failure records.
	golden := t.TempDir()
	s := openPebble(t, golden)
	old := keys("old", 120_000)
	for i := 0; i < len(old); i += 2000 {
		require.NoError(t, s.MarkQueued("c", old[i:i+2000]))
		require.NoError(t, s.MarkDone("c", old[i:i+1000]))
	}
	require.NoError(t, s.RecordFailures("c", []failure.Record{{URL: "http://f.example/", Reason: "dns"}}))
	require.NoError(t, s.Close())
	var ssts int
	filepath.WalkDir(golden, func(p string, _ fs.DirEntry, _ error) error {
		if strings.HasSuffix(p, ".sst") {
			ssts++
		}
		return nil
	})
	require.NotZero(t, ssts, "the golden store has no sstable: write more keys")

	damages := map[string]func(t *testing.T, dir string){
		"store removed": func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "pebble")) },
		"every file emptied": func(t *testing.T, dir string) {
			eachFile(t, dir, func(p string) error { return os.Truncate(p, 0) })
		},
		"sstables scrambled": func(t *testing.T, dir string) {
			eachFile(t, dir, func(p string) error {
				if !strings.HasSuffix(p, ".sst") {
					return nil
				}
				return overwrite(p)
			})
		},
	}
	damages["WAL truncated and scrambled"] = func(t *testing.T, dir string) {
		eachFile(t, dir, func(p string) error {
			if !strings.HasSuffix(p, ".log") {
				return nil
			}
			if err := overwrite(p); err != nil {
				return err
			}
			return seentest.Truncate(p, 0.5)
		})
	}
	for seed := range uint64(12) {
		damages[fmt.Sprintf("random seed %d", seed)] = func(t *testing.T, dir string) {
			damaged, err := seentest.Damage(dir, seed)
			require.NoError(t, err)
			t.Logf("damaged %d files", len(damaged))
		}
	}
	fresh := keys("fresh", 5000)
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(dir, os.DirFS(golden)))
			damage(t, dir)
			s := openPebble(t, dir) // fails the test if it cannot open
			// A sample: a damaged block costs a bit-flip search per read.
			var sample []seen.Key
			for i := 0; i < len(old); i += 20 {
				sample = append(sample, old[i])
				_, err := s.Done("c", old[i])
				require.NoError(t, err, "Done on a damaged store")
			}
			q, err := s.Queued("c", sample)
			require.NoError(t, err, "Queued on a damaged store")
			if q, err := s.Queued("c", fresh); err != nil || countTrue(q) > 0 {
				require.FailNow(t, fmt.Sprintf("keys never marked: %d seen, err %v", countTrue(q), err))
			}
			aside, _ := filepath.Glob(filepath.Join(dir, "pebble.damaged-*"))
			t.Logf("moved aside: %v; old keys still seen: %d of %d", aside, countTrue(q), len(sample))
			if len(aside) > 0 {
				// Moved aside at open or while reading: an empty store now.
				if q, err := s.Queued("c", sample); err != nil || countTrue(q) > 0 {
					assert.Fail(t, fmt.Sprintf("a store moved aside still answers seen for %d keys (err %v)", countTrue(q), err))
				}
			}
			// It works: new marks are taken and kept across a restart.
			require.NoError(t, s.MarkQueued("c", fresh))
			require.NoError(t, s.MarkDone("c", fresh[:10]))
			if err := s.Close(); err != nil {
				t.Logf("close of a damaged store: %v", err)
			}
			s = openPebble(t, dir)
			defer s.Close()
			wantQueued(t, s, "c", fresh[:3], true, true, true)
			wantDone(t, s, "c", fresh[0], true)
			wantDone(t, s, "c", fresh[10], false)
		})
	}
}

func eachFile(t *testing.T, dir string, f func(string) error) {
	t.Helper()
	require.NoError(t, seentest.EachFile(dir, f))
}

// overwrite writes 4 KiB of junk every 64 KiB of a file from its 4th KiB
// on.
func overwrite(p string) error {
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
	return seentest.Overwrite(p, junk, func(size int64) []int64 {
		var at []int64
		for off := int64(0); off < size-int64(len(junk)); off += 64 << 10 {
			at = append(at, off+int64(len(junk)))
		}
		return at
	})
}

// countingWriter counts the lines of a log that hold a string.
type countingWriter struct {
	what string
	n    atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(strings.Count(string(p), w.what)))
	return len(p), nil
}

// TestPebbleSeenDamagedWhileIdle: a store whose sstables fail their
// checksums in Pebble's background work (table stats, compactions) is
// replaced even while no call comes, and its background errors stop:
// Pebble retries a table it cannot read in a loop, and a scheduler with no
// campaign running makes no call that would replace the store.
func TestPebbleSeenDamagedWhileIdle(t *testing.T) {
	dir := t.TempDir()
	s := openPebble(t, dir)
	ks := keys("idle", 20_000)
	require.NoError(t, s.MarkQueued("c", ks))
	require.NoError(t, s.Compact())
	s.Close()
	var ssts int
	eachFile(t, dir, func(p string) error {
		if !strings.HasSuffix(p, ".sst") {
			return nil
		}
		ssts++
		return seentest.ScrambleEvery(p, 512)
	})
	require.NotZero(t, ssts, "no sstable to damage")
	bg := &countingWriter{what: "background error"}
	s, err := seen.OpenPebble(dir, seen.PebbleOptions{Log: slog.New(slog.NewTextHandler(bg, nil))})
	require.NoError(t, err)
	defer s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if aside, _ := filepath.Glob(filepath.Join(dir, "pebble.damaged-*")); len(aside) > 0 {
			break
		}
		if time.Now().After(deadline) {
			require.FailNow(t, fmt.Sprintf("the damaged store was not replaced within 10 s of no calls (%d background errors logged)", bg.n.Load()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	n := bg.n.Load()
	time.Sleep(300 * time.Millisecond) // a quiet period, not a wait for an event
	assert.Zero(t, bg.n.Load()-n, "more background errors after the store was replaced")
	t.Logf("%d background errors logged before the store was replaced", n)
	if q, err := s.Queued("c", ks[:100]); err != nil || countTrue(q) > 0 {
		require.FailNow(t, fmt.Sprintf("the replaced store: %d seen, err %v", countTrue(q), err))
	}
	require.NoError(t, s.MarkDone("c", ks[:1]))
	wantDone(t, s, "c", ks[0], true)
}
