package systest_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With two schedulers, a campaign stopped mid-crawl
// by `starter stop` and started again under the same ID crawls the web
// again, whole: no seen mark of the first run survives on either scheduler.
func TestStopAndStartAgainWithTwoSchedulers(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 250, CrossHost: true, Base: 66})
	s := startBareStack(t)
	addrs := []string{s.sched.Addr()}
	// s.sched is replica 0 of 1; a second scheduler, replica 1 of 2, shares
	// the campaign's shards as a standby (single-active-consumer).
	c2 := frontier.DefaultServerConfig()
	c2.Name, c2.Index, c2.Replicas = "second", 1, 2
	sched2 := nodetest.StartScheduler(t, node.SchedulerConfig{Server: c2, SeenPath: filepath.Join(t.TempDir(), "seen2")})
	addrs = append(addrs, sched2.Addr())
	startWorkers(t, s.temporal.Client(), "test-worker", addrs, s.kafka.Addr())

	run := starterRunner(t, s.services, addrs)
	id := fmt.Sprintf("again-%d", rand.IntN(1e9))
	args := []string{"start", "--id", id, "--fetchers", "4", "--per-host-delay", "20ms", "--per-host-concurrency", "1", "--allow-private",
		"--sink", "kafka://" + s.kafka.Addr() + "/" + s.topic}
	for _, seed := range web.Seeds() {
		args = append(args, "--seed", seed)
	}
	t.Cleanup(func() { run(2*time.Minute, "stop", id) })

	// Run 1: stopped mid-crawl.
	out, err := run(time.Minute, args...)
	require.NoError(t, err, "start:\n%s", out)
	await.For(t, time.Minute, 50*time.Millisecond, "the first run under way", func() error { return ctAtLeastRequested(web, 40) })
	out, err = run(2*time.Minute, "stop", id)
	require.NoError(t, err, "stop:\n%s", out)
	first := ctPagesRequested(web)
	require.Less(t, first, len(web.Pages()), "the first run fetched every page (%d) before the stop: the test proves nothing", first)

	// Run 2, at once: the whole web again.
	web.Reset()
	out, err = run(4*time.Minute, append(args, "--wait")...)
	require.NoError(t, err, "second start --wait:\n%s", out)
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "second run: pages never fetched", "second run: %d of %d pages never fetched, e.g. %v", len(m), len(web.Pages()), m[:min(3, len(m))])
	}
	t.Logf("first run stopped after %d pages; the second fetched %d of %d", first, len(web.Pages())-len(web.Missing()), len(web.Pages()))
}
