package devstack

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
)

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	// A zombie still answers kill 0; /proc says whether it is one.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z' && syscall.Kill(pid, 0) == nil
}

// Every component of the dev stack is a process of its own; one
// SIGKILLed is restarted and the campaign completes with every page
// stored. Kafka SIGKILLed after the crawl comes back with every page.
// Stop leaves no process behind.
func TestDevStackRestartsAKilledScheduler(t *testing.T) {
	testenv.NeedsTemporal(t)
	testenv.NeedsRabbitMQ(t)
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 400, CrossHost: true, Base: 72})

	port := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	out := &SyncBuffer{}
	dataDir := t.TempDir()
	s, err := StartStack(context.Background(), StackOptions{
		DataDir: dataDir, BinDir: t.TempDir(), Out: out, UIPort: -1, TemporalPort: port(),
		KafkaAddr: freeAddr(t), SchedulerAddr: freeAddr(t), Token: "dev-stack-test-token",
		WorkerMetricsAddr: freeAddr(t), SchedulerMetricsAddr: freeAddr(t),
	})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			s.Stop()
		}
		if t.Failed() {
			t.Logf("supervisor:\n%s", out.String())
			for _, c := range []*Child{s.Temporal, s.Kafka, s.Scheduler, s.Worker} {
				t.Logf("--- %s:\n%s", c.Name(), Tail(c.LogPath(), 20))
			}
		}
	}()
	pids := map[string]int{}
	for _, c := range []*Child{s.Temporal, s.Kafka, s.Scheduler, s.Worker} {
		pids[c.Name()] = c.PID()
		require.True(t, alive(c.PID()), "%s is not running", c.Name())
	}
	require.Len(t, map[int]bool{pids["temporal"]: true, pids["kafka"]: true, pids["scheduler"]: true, pids["worker"]: true, os.Getpid(): true}, 5,
		"the stack's components are not separate processes: %v", pids)

	cfg := campaign.Config{
		ID: fmt.Sprintf("devstack-%d", rand.IntN(1e9)), Seeds: web.Seeds(), Fetchers: 4,
		PerHostDelay: new(10 * time.Millisecond), AllowPrivate: true,
		Sinks: []string{"kafka://" + s.KafkaAddr() + "/" + KafkaPagesTopic},
	}
	run, err := s.Client().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	require.NoError(t, err)
	pages := web.Pages()
	await.For(t, 2*time.Minute, 20*time.Millisecond, "a third of the crawl", func() error {
		if n := web.Total(); n < len(pages)/3 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	// The worker's soft memory limit follows the sessions it runs, and
	// their campaigns: the campaign's four now, none once it completed
	// (below).
	memLimit := func(sessions, campaigns int) func() error {
		return func() error {
			want := float64(envconf.WorkerMemoryLimit(sessions, campaigns, 1))
			const name = "go_gc_gomemlimit_bytes"
			if v, err := metrics.ScrapeGauges(context.Background(), s.WorkerMetricsURL(), name); err != nil || v[name] != want {
				return fmt.Errorf("%s %v (%v), want %v", name, v[name], err, want)
			}
			return nil
		}
	}
	await.For(t, 30*time.Second, 20*time.Millisecond, "the worker's memory limit of four sessions", memLimit(cfg.Fetchers, 1))
	require.NoError(t, syscall.Kill(pids["scheduler"], syscall.SIGKILL))
	atKill := web.Total()
	require.Less(t, atKill, len(pages), "the crawl was over before the kill: nothing tested")
	await.For(t, time.Minute, 50*time.Millisecond, "the scheduler restarted", func() error {
		if n, pid := s.Scheduler.Starts(), s.Scheduler.PID(); n != 2 || !alive(pid) {
			return fmt.Errorf("%d starts, pid %d", n, pid)
		}
		return nil
	})
	require.Contains(t, out.String(), fmt.Sprintf("scheduler (pid %d) exited", pids["scheduler"]))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var st workflows.Status
	require.NoError(t, run.Get(ctx, &st))
	require.Equal(t, campaign.StateCompleted, st.State, st.Reason)
	m := web.Missing()
	require.Zero(t, len(m), "pages never fetched, e.g. %v", m[:min(3, len(m))])
	require.Greater(t, web.Total(), atKill, "no request after the kill")

	// Kafka SIGKILLed: restarted on its directory, it still has every page.
	require.NoError(t, syscall.Kill(s.Kafka.PID(), syscall.SIGKILL))
	await.For(t, time.Minute, 100*time.Millisecond, "Kafka restarted", func() error {
		if n := s.Kafka.Starts(); n != 2 {
			return fmt.Errorf("%d starts", n)
		}
		return CheckKafka(context.Background(), []string{s.KafkaAddr()})
	})
	got := readAll(t, s.KafkaAddr(), KafkaPagesTopic)
	var missing []string
	for _, u := range pages {
		if _, ok := got[u]; !ok {
			missing = append(missing, u)
		}
	}
	require.Zero(t, len(missing), "pages not in Kafka after its SIGKILL and restart, e.g. %v", missing[:min(3, len(missing))])

	// Temporal SIGKILLed: restarted on its SQLite file (write-ahead log, no
	// fsync per commit), it still has the campaign, completed.
	require.FileExists(t, filepath.Join(dataDir, "temporal.db-wal"), "Temporal's SQLite file is not in WAL mode")
	require.NoError(t, syscall.Kill(s.Temporal.PID(), syscall.SIGKILL))
	await.For(t, time.Minute, 100*time.Millisecond, "Temporal restarted", func() error {
		if n := s.Temporal.Starts(); n != 2 {
			return fmt.Errorf("%d starts", n)
		}
		return CheckTemporal(context.Background(), s.TemporalAddr())
	})
	await.For(t, 30*time.Second, 100*time.Millisecond, "the campaign after Temporal's restart", func() error {
		d, err := s.Client().DescribeWorkflowExecution(context.Background(), cfg.ID, "")
		if err != nil {
			return err
		}
		if got := d.WorkflowExecutionInfo.GetStatus(); got != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return fmt.Errorf("status %s", got)
		}
		return nil
	})

	await.For(t, 30*time.Second, 20*time.Millisecond, "the worker's memory limit with no session", memLimit(0, 0))

	// Both serve their metrics where the stack says: the worker counts the
	// pages the test web served, the scheduler (restarted) its own.
	desc := s.Describe()
	for _, ep := range []struct{ url, metric string }{
		{s.WorkerMetricsURL(), "drover_pages_fetched_total{"},
		{s.SchedulerMetricsURL(), "drover_scheduler_seen_store_bytes"},
	} {
		require.Contains(t, desc, ep.url, "Describe does not say where the metrics are")
		resp, err := http.Get(ep.url)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, ep.url)
		require.Contains(t, string(body), ep.metric, "%s serves no %s", ep.url, ep.metric)
	}

	for _, c := range []*Child{s.Temporal, s.Kafka, s.Scheduler, s.Worker} {
		pids[c.Name()] = c.PID()
	}
	stopped = true
	require.NoError(t, s.Stop())
	t.Logf("supervisor:\n%s", out.String())
	for name, pid := range pids {
		require.False(t, alive(pid), "%s (pid %d) still runs after Stop", name, pid)
	}
}
