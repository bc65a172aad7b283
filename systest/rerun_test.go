package systest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/relay"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSameIDAfterACloseThatMissedAScheduler: a campaign started again
// under the same ID crawls the whole web again, whether its last run's
// Close reached both schedulers ("closed"), or missed one that was down or
// partitioned. The scheduler the Close missed kept the first run's seen
// marks (and, partitioned, its live campaign, sessions and all); the
// second run must not take its seeds or links for done; every scheduler,
// those the Close reached included, must serve the second run's fetchers;
// and the page that failed in the first run (host 0's 404) is fetched and
// recorded as a failure again. Both runs are started as a user would,
// with the starter.
func TestSameIDAfterACloseThatMissedAScheduler(t *testing.T) {
	sv := startServices(t)
	for i, fault := range []string{"closed", "down", "partitioned"} {
		t.Run(fault, func(t *testing.T) {
			web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 100, CrossHost: true, Base: byte(71 + i)})
			// Two replicas. Which consumes which shards depends on which
			// subscribed first, so the fault goes to one that fetched.
			scheds := []*rerunScheduler{{name: "a", index: 0}, {name: "b", index: 1}}
			var addrs []string
			for _, rs := range scheds {
				rs.start(t, fault == "partitioned")
				addrs = append(addrs, rs.addr)
			}
			startWorkers(t, sv.temporal.Client(), "rerun-"+fault, addrs, sv.kafka.Addr())

			run := starterRunner(t, sv, addrs)
			id := fmt.Sprintf("rerun-%s-%d", fault, rand.IntN(1e9))
			args := []string{"start", "--id", id, "--fetchers", "3", "--per-host-delay", "5ms", "--allow-private",
				"--sink", "kafka://" + sv.kafka.Addr() + "/" + sv.topic}
			for _, seed := range web.Seeds() {
				args = append(args, "--seed", seed)
			}
			t.Cleanup(func() { run(2*time.Minute, "stop", id) })

			// Run 1: the whole web, and a scheduler that fetched goes away
			// before the Close: down once every page is fetched;
			// partitioned mid-crawl, so that the Close cannot have begun
			// (its first round would close run 1 there, which the
			// partition must leave open).
			out, err := run(time.Minute, args...)
			require.NoError(t, err, "start:\n%s", out)
			left := 0
			if fault == "partitioned" {
				left = len(web.Pages()) / 2
			}
			await.For(t, 3*time.Minute, 20*time.Millisecond, "run 1 under way", func() error {
				if m := web.Missing(); len(m) > left {
					return fmt.Errorf("%d of %d pages not fetched yet", len(m), len(web.Pages()))
				}
				return nil
			})
			key1 := rerunFrontierKey(t, sv, id)
			var victim *rerunScheduler
			for _, rs := range scheds {
				if st, err := rs.s.Server().Stats(key1); err == nil && st.Fetched > 0 && st.Sessions > 0 {
					victim = rs
				}
			}
			require.NotNil(t, victim, "no scheduler holds pages and sessions of run 1: the fault would hit nothing")
			switch fault {
			case "down":
				victim.s.Close()
			case "partitioned":
				require.NotZero(t, victim.cut.Partition(), "the partition cut no connection to scheduler %s", victim.name)
			}
			st1 := ctResult(t, sv.temporal.Client().GetWorkflow(context.Background(), id, ""), 4*time.Minute)
			require.Equal(t, campaign.StateCompleted, st1.State, "run 1's state (%s); want completed, with a close that failed unless %q", st1.Reason, "closed")
			require.Equal(t, fault != "closed", strings.Contains(st1.Reason, "close failed"),
				"run 1 ended %s (%s): whether its close failed; want a close that failed unless %q", st1.State, st1.Reason, "closed")
			switch fault {
			case "down":
				// It comes back on its own store, which still has run 1's marks.
				victim.restart(t)
			case "partitioned":
				// It never went away: it still has run 1's campaign open (its
				// sessions, silent since the cut, may have timed out).
				st, err := victim.s.Server().Stats(key1)
				require.NoError(t, err, "the partitioned scheduler %s's stats of run 1", victim.name)
				require.NotZero(t, st.Fetched, "the partitioned scheduler %s dropped run 1 (%+v): nothing left to prove", victim.name, st)
				victim.cut.Heal()
			}

			// Run 2, same ID: the whole web again, every fetcher served.
			web.Reset()
			out, err = run(time.Minute, args...)
			require.NoError(t, err, "second start:\n%s", out)
			key2 := rerunFrontierKey(t, sv, id)
			await.For(t, 2*time.Minute, 50*time.Millisecond, "both schedulers serving run 2's fetchers", func() error {
				for _, rs := range scheds {
					if st, err := rs.s.Server().Stats(key2); err != nil || st.Sessions == 0 {
						return fmt.Errorf("scheduler %s has no session of run 2 (%v)", rs.name, err)
					}
				}
				return nil
			})
			st2 := ctResult(t, sv.temporal.Client().GetWorkflow(context.Background(), id, ""), 4*time.Minute)
			if m := web.Missing(); len(m) > 0 {
				assert.Failf(t, "run 2: pages never fetched", "run 2: %d of %d pages never fetched, e.g. %v\nstarter: %s", len(m), len(web.Pages()), m[:min(3, len(m))], out)
			}
			assert.Zero(t, st2.Restarts, "run 2's fetcher restarts (failure %+v): a scheduler refused its sessions", st2.Failure)
			assert.Nil(t, st2.Failure, "run 2's failure (%d restarts): a scheduler refused its sessions", st2.Restarts)
			assert.NotEqual(t, key1, st2.Frontier, "run 2 has run 1's frontier key")
			if st, err := victim.s.Server().Stats(key1); assert.NoError(t, err, "scheduler %s's stats of run 1 after run 2", victim.name) {
				assert.Zero(t, st.Fetched, "scheduler %s still has run 1 open after run 2 (%+v): pages fetched", victim.name, st)
				assert.Zero(t, st.Sessions, "scheduler %s still has run 1 open after run 2 (%+v): sessions", victim.name, st)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if fs, _, err := (session.Client{Token: session.DevToken}).Failures(ctx, addrs, st2.Frontier, "4xx"); assert.NoError(t, err, "run 2's 4xx failures") {
				assert.NotEmpty(t, fs, "run 2 recorded no 4xx failure: the page that failed in run 1 was not tried again")
			}
			t.Logf("%s (scheduler %s): run 1 %s (%s); run 2 %s, %d pages, %d fetched twice", fault, victim.name, st1.State, st1.Reason,
				st2.State, len(web.Pages())-len(web.Missing()), len(web.Duplicates()))
		})
	}
}

// rerunScheduler is one of the test's two schedulers: replica index of 2,
// on a seen store of its own, reached through a relay that can partition
// it when the test asks for one.
type rerunScheduler struct {
	name  string
	index int
	cfg   frontier.ServerConfig
	seen  string
	s     *node.Scheduler
	addr  string // what workers and the starter dial
	cut   *relay.Cutter
}

func (rs *rerunScheduler) start(t *testing.T, relayed bool) {
	rs.cfg = frontier.DefaultServerConfig()
	rs.cfg.Name, rs.cfg.Index, rs.cfg.Replicas = rs.name, rs.index, 2
	// Partitioned, a scheduler keeps the shards it consumes until its cut
	// sessions time out and it has none for IdleRelease; then the other,
	// their standby, takes them and finishes run 1.
	rs.cfg.IdleRelease = time.Second
	rs.seen = filepath.Join(t.TempDir(), "seen-"+rs.name)
	rs.s = nodetest.StartScheduler(t, node.SchedulerConfig{Server: rs.cfg, SeenPath: rs.seen})
	rs.addr = rs.s.Addr()
	if relayed {
		rs.cut = relay.NewCutter(t, rs.s.Addr())
		rs.addr = rs.cut.Addr()
	}
}

// restart starts the scheduler again, on its address and its store.
func (rs *rerunScheduler) restart(t *testing.T) {
	rs.s = nodetest.StartScheduler(t, node.SchedulerConfig{Server: rs.cfg, SeenPath: rs.seen, Listen: rs.addr})
}

// rerunFrontierKey is the frontier key of the campaign's current run, from
// its status query.
func rerunFrontierKey(t *testing.T, sv *services, id string) string {
	t.Helper()
	var key string
	await.For(t, 30*time.Second, 100*time.Millisecond, "the campaign's frontier key", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, err := sv.temporal.Client().QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err != nil {
			return err
		}
		var st workflows.Status
		if err := v.Get(&st); err != nil {
			return err
		}
		if st.Frontier == "" {
			return fmt.Errorf("campaign %s reports no frontier key", id)
		}
		key = st.Frontier
		return nil
	})
	return key
}

// starterRunner runs the starter binary against the services and the
// schedulers at addrs, each call bounded by its timeout.
func starterRunner(t *testing.T, sv *services, addrs []string) func(timeout time.Duration, args ...string) (string, error) {
	starter := filepath.Join(binaries(t), "starter")
	env := append(os.Environ(), "TEMPORAL_ADDRESS="+sv.temporal.Address(), "TEMPORAL_NAMESPACE="+sv.temporal.Namespace(),
		"DROVER_SCHEDULER="+strings.Join(addrs, ","), "DROVER_TOKEN="+session.DevToken, "KAFKA_BROKERS="+sv.kafka.Addr())
	return func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, starter, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}
