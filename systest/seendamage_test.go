package systest_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/frontier/seen/seentest"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCrawlSurvivesDamagedSeenStore: a
// crawl's only scheduler is stopped mid-crawl, the files of its seen store
// are truncated, scrambled or removed (or the whole store directory is
// gone) while it is down, and it is started again on the same directory.
// The campaign must complete with every page requested from the web at
// least once and in Kafka: a store that cannot tell answers "not seen", so
// damage costs duplicate fetches, never a URL.
func TestCrawlSurvivesDamagedSeenStore(t *testing.T) {
	s := startServices(t)
	addr := freeAddr(t)
	startWorkers(t, s.temporal.Client(), "seen-damage-worker", []string{addr}, s.kafka.Addr())

	variants := []struct {
		name string
		// compact flushes and compacts the stopped store first, so that the
		// crawl's marks are in sstables, not only in the WAL.
		compact bool
		damage  func(t *testing.T, dir string)
		// aside: the restarted scheduler must have moved the store aside
		// (it could not open it, or a read failed its checksum).
		aside bool
	}{
		{
			name: "MANIFEST and WAL truncated, WAL scrambled", aside: true,
			damage: func(t *testing.T, dir string) {
				n := sdEachFile(t, dir, func(p string) error {
					base := filepath.Base(p)
					switch {
					case strings.HasPrefix(base, "MANIFEST-"):
						return seentest.Truncate(p, 0.5)
					case strings.HasSuffix(base, ".log"):
						if err := seentest.ScrambleEvery(p, 512); err != nil {
							return err
						}
						return seentest.Truncate(p, 0.7)
					}
					return nil
				})
				require.GreaterOrEqual(t, n, 2, "damaged files: the store has no MANIFEST or no WAL")
			},
		},
		{
			name: "sstables scrambled after a compaction", compact: true, aside: true,
			damage: func(t *testing.T, dir string) {
				n := sdEachFile(t, dir, func(p string) error {
					if !strings.HasSuffix(p, ".sst") {
						return nil
					}
					return seentest.ScrambleEvery(p, 512)
				})
				require.NotZero(t, n, "the compacted store has no sstable")
			},
		},
		{
			name: "random truncation, scrambling and removal", compact: true,
			damage: func(t *testing.T, dir string) {
				damaged, err := seentest.Damage(dir, 12)
				require.NoError(t, err)
				require.NotEmpty(t, damaged, "no file to damage")
				t.Logf("seentest.Damage: %d files", len(damaged))
			},
		},
		{
			name: "store directory missing",
			damage: func(t *testing.T, dir string) {
				require.NoError(t, os.RemoveAll(dir))
			},
		},
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 100, CrossHost: true, Base: byte(80 + i)})
			pages := web.Pages()
			seenDir := filepath.Join(t.TempDir(), "seen")
			var slogs devstack.SyncBuffer // the schedulers' log, shown if the test fails
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("scheduler log (last lines):\n%s", devstack.LastLines(slogs.String(), 30))
				}
			})
			sched := sdStartScheduler(t, addr, seenDir, &slogs)

			cfg := campaign.Config{
				ID:                 fmt.Sprintf("seen-damage-%d-%d", i, rand.IntN(1e9)),
				Seeds:              web.Seeds(),
				Fetchers:           4,
				PerHostDelay:       new(2 * time.Millisecond),
				PerHostConcurrency: 2,
				AllowPrivate:       true,
				Sinks:              []string{"kafka://" + s.kafka.Addr() + "/" + s.topic},
			}
			wait := runCampaign(t, s.temporal.Client(), cfg, 2*time.Minute)
			stopAt := len(pages) * 4 / 10
			await.For(t, time.Minute, 5*time.Millisecond, "the stop point of the crawl", func() error {
				if n := web.Total(); n < stopAt {
					return fmt.Errorf("the web served %d requests, waiting for %d", n, stopAt)
				}
				return nil
			})
			if err := sched.Close(); err != nil {
				t.Logf("scheduler close: %v", err)
			}
			atStop := web.Total()
			require.Less(t, atStop, len(pages), "the crawl was over (%d requests) before the stop: nothing tested", atStop)
			if v.compact {
				st, err := seen.OpenPebble(seenDir, seen.PebbleOptions{})
				require.NoError(t, err)
				require.NoError(t, st.Compact())
				require.NoError(t, st.Close())
			}
			v.damage(t, seenDir)
			before := len(slogs.String())

			sdStartScheduler(t, addr, seenDir, &slogs)
			restarted := web.Total()
			st := wait()

			aside, _ := filepath.Glob(filepath.Join(seenDir, "pebble.damaged-*"))
			t.Logf("stopped after %d of %d requests; %d more after the restart; %d URLs fetched more than once; moved aside: %d; %d fetched as last reported",
				atStop, len(pages), web.Total()-restarted, len(web.Duplicates()), len(aside), st.PagesFetched)
			if v.aside {
				assert.NotEmpty(t, aside, "the damaged store was not moved aside: the damage went unnoticed")
			}
			if len(aside) > 0 {
				assert.True(t, strings.Contains(slogs.String()[before:], "SEEN STORE DAMAGED"), "the store was moved aside without an error in the scheduler's log")
			}
			assert.Greater(t, web.Total(), restarted, "no request after the restart: the crawl did not resume")
			if m := web.Missing(); len(m) > 0 {
				assert.Failf(t, "pages never requested", "%d of %d pages never requested, e.g. %v", len(m), len(pages), m[:min(5, len(m))])
			}
			// Read again while pages are missing: readTopic ends a
			// partition at its first 2 s without a record, which a loaded
			// -race run can take to return the partition's first one (a
			// whole partition, a quarter of the pages, was seen missing
			// once that way, and present on the next read).
			await.For(t, 45*time.Second, 100*time.Millisecond, "every page in Kafka", func() error {
				got, _ := kafkaCounts(t, s, len(pages))
				var lost []string
				for _, u := range pages {
					if got[u] == 0 {
						lost = append(lost, u)
					}
				}
				if len(lost) > 0 {
					return fmt.Errorf("%d of %d pages not in Kafka, e.g. %v", len(lost), len(pages), lost[:min(5, len(lost))])
				}
				return nil
			})
		})
	}
}

// sdStartScheduler starts an in-process scheduler on addr with the seen
// store in dir; it is closed at the end of the test (again, if the test
// closed it already).
func sdStartScheduler(t *testing.T, addr, dir string, w io.Writer) *node.Scheduler {
	t.Helper()
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var sched *node.Scheduler
	// The port of a scheduler just closed may take a moment to be free.
	await.For(t, 10*time.Second, 50*time.Millisecond, "a scheduler started on "+addr, func() error {
		var err error
		sched, err = nodetest.NewScheduler(node.SchedulerConfig{Listen: addr, SeenPath: dir, Log: log})
		return err
	})
	t.Cleanup(func() { sched.Close() })
	return sched
}

// sdEachFile calls f on every file of the Pebble store in dir and returns
// how many it changed (f returning nil for a file it left alone counts
// only when the file's size or bytes differ afterwards).
func sdEachFile(t *testing.T, dir string, f func(string) error) int {
	t.Helper()
	n := 0
	err := seentest.EachFile(dir, func(p string) error {
		before, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := f(p); err != nil {
			return err
		}
		after, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if string(before) != string(after) {
			n++
		}
		return nil
	})
	require.NoError(t, err)
	return n
}
