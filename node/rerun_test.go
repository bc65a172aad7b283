package node_test

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
	"github.com/drover-crawl/drover/frontier/session"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/relay"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
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
			// Two replicas, each the first consumer of half the shards, so
			// each holds seen marks of its own.
			ca, cb := frontier.DefaultServerConfig(), frontier.DefaultServerConfig()
			ca.Name, ca.Index, ca.Replicas = "a", 0, 2
			cb.Name, cb.Index, cb.Replicas = "b", 1, 2
			a := nodetest.StartScheduler(t, node.SchedulerConfig{Server: ca, SeenPath: filepath.Join(t.TempDir(), "seen-a")})
			bSeen := filepath.Join(t.TempDir(), "seen-b")
			b := nodetest.StartScheduler(t, node.SchedulerConfig{Server: cb, SeenPath: bSeen})
			bAddr := b.Addr()
			var cut *relay.Cutter
			if fault == "partitioned" {
				// Everyone reaches b through a relay that can partition it.
				cut = relay.NewCutter(t, b.Addr())
				bAddr = cut.Addr()
			}
			addrs := []string{bAddr, a.Addr()} // b first: a close round that stops at b reaches no one
			startWorkers(t, sv.temporal.Client(), "rerun-"+fault, addrs, sv.kafka.Addr())

			run := starterRunner(t, sv, addrs)
			id := fmt.Sprintf("rerun-%s-%d", fault, rand.IntN(1e9))
			args := []string{"start", "--id", id, "--fetchers", "3", "--per-host-delay", "5ms", "--allow-private",
				"--sink", "kafka://" + sv.kafka.Addr() + "/" + sv.topic}
			for _, seed := range web.Seeds() {
				args = append(args, "--seed", seed)
			}
			t.Cleanup(func() { run(2*time.Minute, "stop", id) })

			// Run 1: the whole web, then b goes away before the Close.
			if out, err := run(time.Minute, args...); err != nil {
				t.Fatalf("start: %v\n%s", err, out)
			}
			await.For(t, 3*time.Minute, 50*time.Millisecond, "run 1 fetches every page", func() error {
				if m := web.Missing(); len(m) > 0 {
					return fmt.Errorf("%d of %d pages not fetched yet", len(m), len(web.Pages()))
				}
				return nil
			})
			key1 := rerunFrontierKey(t, sv, id)
			held, err := b.Server().Stats(key1)
			if err != nil || held.Sessions == 0 {
				t.Fatalf("scheduler b holds no session of run 1 (%+v, %v): the fault would hit nothing", held, err)
			}
			switch fault {
			case "down":
				b.Close()
			case "partitioned":
				if n := cut.Partition(); n == 0 {
					t.Fatal("the partition cut no connection to scheduler b")
				}
			}
			st1 := ctResult(t, sv.temporal.Client().GetWorkflow(context.Background(), id, ""), 4*time.Minute)
			if closeFailed := strings.Contains(st1.Reason, "close failed"); st1.State != campaign.StateCompleted || closeFailed != (fault != "closed") {
				t.Fatalf("run 1 ended %s (%s); want completed, with a close that failed unless %q", st1.State, st1.Reason, "closed")
			}
			switch fault {
			case "down":
				// b comes back on its own store, which still has run 1's marks.
				b = nodetest.StartScheduler(t, node.SchedulerConfig{Server: cb, SeenPath: bSeen, Listen: bAddr})
			case "partitioned":
				// b never went away: it still has run 1's campaign open (its
				// sessions, silent since the cut, may have timed out).
				if st, err := b.Server().Stats(key1); err != nil || st.Fetched == 0 {
					t.Fatalf("the partitioned scheduler dropped run 1 (%+v, %v): nothing left to prove", st, err)
				}
				cut.Heal()
			}

			// Run 2, same ID: the whole web again, every fetcher served.
			web.Reset()
			out, err := run(time.Minute, args...)
			if err != nil {
				t.Fatalf("second start: %v\n%s", err, out)
			}
			key2 := rerunFrontierKey(t, sv, id)
			await.For(t, 2*time.Minute, 50*time.Millisecond, "both schedulers serving run 2's fetchers", func() error {
				for name, s := range map[string]*node.Scheduler{"a": a, "b": b} {
					if st, err := s.Server().Stats(key2); err != nil || st.Sessions == 0 {
						return fmt.Errorf("scheduler %s has no session of run 2 (%v)", name, err)
					}
				}
				return nil
			})
			st2 := ctResult(t, sv.temporal.Client().GetWorkflow(context.Background(), id, ""), 4*time.Minute)
			if m := web.Missing(); len(m) > 0 {
				t.Errorf("run 2: %d of %d pages never fetched, e.g. %v\nstarter: %s", len(m), len(web.Pages()), m[:min(3, len(m))], out)
			}
			if st2.Restarts != 0 || st2.Failure != nil {
				t.Errorf("run 2 restarted fetchers %d times (failure %+v): a scheduler refused its sessions", st2.Restarts, st2.Failure)
			}
			if st2.Frontier == key1 {
				t.Errorf("run 2 has run 1's frontier key %s", key1)
			}
			if st, err := b.Server().Stats(key1); err != nil || st.Fetched != 0 || st.Sessions != 0 {
				t.Errorf("scheduler b still has run 1 open after run 2 (%+v, %v)", st, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if fs, _, err := session.Failures(ctx, addrs, session.DevToken, st2.Frontier, "4xx"); err != nil || len(fs) == 0 {
				t.Errorf("run 2 recorded no 4xx failure (%v): the page that failed in run 1 was not tried again", err)
			}
			t.Logf("%s: run 1 %s (%s); run 2 %s, %d pages, %d fetched twice", fault, st1.State, st1.Reason, st2.State,
				len(web.Pages())-len(web.Missing()), len(web.Duplicates()))
		})
	}
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
