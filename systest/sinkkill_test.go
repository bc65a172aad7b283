package systest_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// At-least-once into the PostgreSQL and WARC sinks across a SIGKILL: a
// campaign runs on two worker processes, one is killed while its sink holds
// a batch of pages it has not acknowledged, and the campaign completes with
// every page of the web requested and held by the sink at least once, with
// the bytes the server sent. The PostgreSQL and WARC sinks group concurrent
// Stores into one COPY or one write+fsync (sink/batch.go): the kill lands
// inside such a flush, and each test shows it from the outside.

// sinkKillPG is the PostgreSQL the PostgreSQL test writes to, as the
// workers reach it (user postgres, trust).
const sinkKillPG = "postgres://postgres@127.0.0.1:5432/test"

// sinkKill is a campaign on two worker processes, worker-a and worker-b.
type sinkKill struct {
	t     *testing.T
	web   *testweb.Web
	s     *stack
	procs map[string]*devstack.Proc
	cfg   campaign.Config
	run   client.WorkflowRun
	start time.Time
	// frontier is the campaign's frontier key, once stats has asked.
	frontier string
}

// startSinkKill starts the stack, the web (4 hosts of 75 pages, 303 in
// all, on 127.base.0.x), the two workers (with extra(identity) in their
// environment) and a campaign storing into sinkURI. The per-host delay
// makes the crawl last about 8 s when nothing stops it: a kill at a fifth
// of the web lands well inside it.
func startSinkKill(t *testing.T, prefix string, base byte, sinkURI string, extra func(identity string) []string) *sinkKill {
	t.Helper()
	return startSinkKillWith(t, prefix, base, sinkURI, extra, func(*campaign.Config) {})
}

// startSinkKillWith is startSinkKill with the campaign's config changed
// by with before it starts.
func startSinkKillWith(t *testing.T, prefix string, base byte, sinkURI string, extra func(identity string) []string, with func(*campaign.Config)) *sinkKill {
	t.Helper()
	bin := filepath.Join(binaries(t), "worker")
	k := &sinkKill{t: t, procs: map[string]*devstack.Proc{}}
	k.web = webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 75, CrossHost: true, Base: base})
	k.s = startBareStack(t)
	for _, id := range []string{"worker-a", "worker-b"} {
		env := append([]string{
			"TEMPORAL_ADDRESS=" + k.s.temporal.Address(),
			"TEMPORAL_NAMESPACE=" + k.s.temporal.Namespace(),
			"DROVER_SCHEDULER=" + k.s.sched.Addr(),
			"KAFKA_BROKERS=" + k.s.kafka.Addr(),
			"DROVER_TOKEN=" + session.DevToken,
		}, extra(id)...)
		k.procs[id] = startProc(t, id, bin, []string{"-identity", id, "-metrics-addr", "127.0.0.1:0"}, env)
	}
	k.cfg = campaign.Config{
		ID:           fmt.Sprintf("%s-%d", prefix, rand.IntN(1e9)),
		Seeds:        k.web.Seeds(),
		Fetchers:     4,
		PerHostDelay: new(100 * time.Millisecond),
		AllowPrivate: true,
		Sinks:        []string{sinkURI},
	}
	with(&k.cfg)
	k.start = time.Now()
	k.run = ctStartCampaign(t, k.s.temporal.Client(), k.cfg)
	total := len(k.web.Pages())
	await.For(t, 2*time.Minute, 20*time.Millisecond, "a fifth of the pages requested", func() error {
		for id, p := range k.procs {
			if !p.Alive() {
				require.FailNowf(t, "a worker exited", "%s exited: %v\n%s", id, p.Err(), p.Tail(20))
			}
		}
		return ctAtLeastRequested(k.web, total/5)
	})
	return k
}

// stats reads the campaign's stats from the scheduler.
func (k *sinkKill) stats() session.Stats {
	k.t.Helper()
	if k.frontier == "" {
		st, err := ctQueryStatus(k.t, k.s.temporal.Client(), k.cfg.ID)
		require.NoError(k.t, err)
		require.NotEmpty(k.t, st.Frontier, "campaign %s reports no frontier key", k.cfg.ID)
		k.frontier = st.Frontier
	}
	ss, err := k.s.sched.Server().Stats(k.frontier)
	require.NoError(k.t, err)
	return ss
}

// awaitUnderWay waits (bounded) for a reading of the scheduler's stats
// with leases out while pages of the web were never requested: the crawl
// under way. A lease is out for a few milliseconds per page, so a single
// reading can miss them.
func (k *sinkKill) awaitUnderWay() {
	k.t.Helper()
	var st session.Stats
	var missing int
	await.For(k.t, 20*time.Second, 5*time.Millisecond, "leases out, pages never requested", func() error {
		st, missing = k.stats(), len(k.web.Missing())
		require.NotZero(k.t, missing, "every page was requested before a reading with leases out")
		if st.InFlight == 0 {
			return fmt.Errorf("no lease out (%d pages fetched)", st.Fetched)
		}
		return nil
	})
	k.t.Logf("under way after %s: %d of %d pages requested, %d leases out, %d pages fetched", time.Since(k.start).Round(time.Millisecond),
		len(k.web.Pages())-missing, len(k.web.Pages()), st.InFlight, st.Fetched)
}

// kill SIGKILLs victim; Proc.Kill returns once it is gone.
func (k *sinkKill) kill(victim string) {
	k.t.Helper()
	k.procs[victim].Kill()
}

// finish waits for the campaign to complete and checks, on the web's side,
// that every page was requested. It returns the URLs requested more than
// once.
func (k *sinkKill) finish() map[string]int {
	k.t.Helper()
	final := ctResult(k.t, k.run, 3*time.Minute)
	require.Equal(k.t, campaign.StateCompleted, final.State, "campaign %s: state (%s)", k.cfg.ID, final.Reason)
	dups := k.web.Duplicates()
	k.t.Logf("completed %s after the start: %d pages fetched, %d restarts, %d URLs requested more than once",
		time.Since(k.start).Round(time.Millisecond), final.PagesFetched, final.Restarts, len(dups))
	if m := k.web.Missing(); len(m) > 0 {
		assert.Failf(k.t, "pages never requested", "%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}
	return dups
}

// checkHeld fails the test for every page of the web the sink holds no
// copy of, and for every copy whose body differs from what the server
// sent. got maps a URL to the bodies of its copies.
func checkHeld(t *testing.T, web *testweb.Web, sinkName string, got map[string][][]byte) {
	t.Helper()
	copies := 0
	for u, bodies := range got {
		want, ok := web.Body(u)
		if !assert.True(t, ok, "%s holds %s, not a URL of the web", sinkName, u) {
			continue
		}
		for _, b := range bodies {
			copies++
			assert.True(t, bytes.Equal(b, want), "a copy of %s in %s differs from what the server sent (%d bytes, want %d)", u, sinkName, len(b), len(want))
		}
	}
	var lost []string
	for _, u := range web.Pages() {
		if len(got[u]) == 0 {
			lost = append(lost, u)
		}
	}
	t.Logf("%s: %d copies of %d URLs", sinkName, copies, len(got))
	if len(lost) > 0 {
		assert.Failf(t, "pages not in the sink", "%d of %d pages not in %s, e.g. %v", len(lost), len(web.Pages()), sinkName, lost[:min(5, len(lost))])
	}
}

// TestWorkerKilledMidCopyPostgres kills a worker while its COPY into the
// campaign's table is open. The test takes a SHARE lock on the table
// (reads go on, writes wait), so every COPY waits for it with its pages
// unacknowledged; the workers connect with PGAPPNAME set to their
// identity, so pg_stat_activity names the worker of each waiting COPY. A
// worker with such a COPY is SIGKILLed. PostgreSQL would still run the
// dead worker's COPY once the lock goes (pgx sends a COPY's rows and its
// end without waiting for the server, so they were in the socket before
// the kill), so the test then terminates the dead worker's backends: its
// open COPY is rolled back, as when the worker's host dies with it. The lock is released; the dead worker's pages, never
// acknowledged, must come back with its leases and be stored by the
// survivor (and the sessions restarted on it).
func TestWorkerKilledMidCopyPostgres(t *testing.T) {
	testenv.NeedsPostgres(t)
	table := fmt.Sprintf("drover_kill_%d", rand.IntN(1e9))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg, err := pgx.Connect(ctx, sinkKillPG+"?sslmode=disable")
	require.NoError(t, err, "PostgreSQL")
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), sinkKillPG+"?sslmode=disable")
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
	})
	defer pg.Close(context.Background())

	k := startSinkKill(t, "pgkill", 85, sinkKillPG+"?table="+table, func(id string) []string { return []string{"PGAPPNAME=" + id} })

	// Pages have been stored: the sink has created the table. Writes wait
	// from here on.
	lock, err := pg.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(context.Background())
	_, err = lock.Exec(ctx, "LOCK TABLE "+table+" IN SHARE MODE")
	require.NoError(t, err)
	var victim string
	var copies map[string]int
	await.For(t, 30*time.Second, 20*time.Millisecond, "a worker's COPY waiting for the lock", func() error {
		var err error
		if copies, err = waitingCopies(ctx, table); err != nil {
			return err
		}
		for id := range k.procs {
			if copies[id] > 0 {
				victim = id
				return nil
			}
		}
		return fmt.Errorf("COPYs waiting by application: %v", copies)
	})
	k.awaitUnderWay() // the stores wait: their leases stay out
	t.Logf("COPYs waiting for the lock by worker: %v; killing %s", copies, victim)
	k.kill(victim)
	ended, err := terminateBackends(ctx, victim)
	require.NoError(t, err)
	t.Logf("terminated %d backends of %s: %v", len(ended), victim, ended)
	n := 0
	for _, b := range ended {
		if strings.HasSuffix(b, ": waiting copy") {
			n++
		}
	}
	// Every COPY seen waiting still waited (the kill hit them open); the
	// worker may have opened more since, which wait behind the lock too.
	require.GreaterOrEqual(t, n, copies[victim], "%s's COPYs still waiting when its backends were terminated, want at least the %d seen", victim, copies[victim])
	require.NoError(t, lock.Rollback(ctx))

	dups := k.finish()
	// The dead worker's COPYs held pages whose leases were out: they went
	// back to the frontier and were fetched again.
	assert.NotEmpty(t, dups, "no page was requested twice: the pages of %s's open COPYs were not fetched again", victim)

	rows, err := pg.Query(ctx, "SELECT url, body FROM "+table+" WHERE campaign = $1 AND status > 0", k.cfg.ID)
	require.NoError(t, err)
	got := map[string][][]byte{}
	for rows.Next() {
		var u string
		var body []byte
		require.NoError(t, rows.Scan(&u, &body))
		got[u] = append(got[u], body)
	}
	require.NoError(t, rows.Err())
	checkHeld(t, k.web, "table "+table, got)
}

// waitingCopies counts, by application_name, the COPYs into table that
// wait for a lock.
func waitingCopies(ctx context.Context, table string) (map[string]int, error) {
	c, err := pgx.Connect(ctx, sinkKillPG+"?sslmode=disable")
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT application_name, count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query ILIKE 'copy %' AND strpos(query, $1) > 0 GROUP BY 1`, `"`+table+`"`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, rows.Err()
}

// terminateBackends ends every backend whose application_name is app and
// describes each ("pid 123: waiting copy", "pid 124: idle").
func terminateBackends(ctx context.Context, app string) ([]string, error) {
	c, err := pgx.Connect(ctx, sinkKillPG+"?sslmode=disable")
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT pid, CASE WHEN wait_event_type = 'Lock' AND query ILIKE 'copy %' THEN 'waiting copy' ELSE state END,
		pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var pid int
		var what string
		var ok bool
		if err := rows.Scan(&pid, &what, &ok); err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("backend %d (%s) of %s not terminated", pid, what, app)
		}
		out = append(out, fmt.Sprintf("pid %d: %s", pid, what))
	}
	return out, rows.Err()
}
