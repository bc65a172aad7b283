package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// busy is a moment in the middle of a crawl: pages missing, the campaign
// running, 4 leases out and 3 sessions on worker 1, 5 on worker 0.
func busy() Moment {
	return Moment{
		Missing:  1200,
		Status:   enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
		Sessions: map[string]int{workerIdentity(0): 5, workerIdentity(1): 3},
		Worker:   workerIdentity(1),
		Key:      "chaos-x~run",
		Stats:    session.Stats{InFlight: 4, Sessions: 8, Held: 900, Fetched: 300},
	}
}

func TestVerdict(t *testing.T) {
	all := needLeases | needSessions | needWorker
	for _, tc := range []struct {
		name  string
		needs need
		edit  func(*Moment)
		want  string // "" passes
		final bool   // waiting will not help
	}{
		{name: "work in flight", needs: all, edit: func(*Moment) {}},
		{name: "crawl over", needs: needLeases, edit: func(m *Moment) { m.Missing = 0 },
			want: "no page missing", final: true},
		{name: "campaign completed", needs: needLeases, edit: func(m *Moment) { m.Status = enums.WORKFLOW_EXECUTION_STATUS_COMPLETED },
			want: "the campaign was Completed", final: true},
		{name: "campaign not described", needs: needLeases, edit: func(m *Moment) { m.DescribeErr = errors.New("deadline exceeded") },
			want: "campaign not described"},
		{name: "stats not read", needs: needSessions, edit: func(m *Moment) { m.StatsErr = errors.New("deadline exceeded") },
			want: "stats of chaos-x~run not read"},
		{name: "stats of an unknown key", needs: needSessions, edit: func(m *Moment) { m.Stats = session.Stats{} },
			want: "not its campaign"},
		{name: "no lease in flight", needs: needLeases, edit: func(m *Moment) { m.Stats.InFlight = 0 },
			want: "no lease in flight"},
		{name: "no lease, none needed", needs: needSessions, edit: func(m *Moment) { m.Stats.InFlight = 0 }},
		{name: "no session", needs: needSessions, edit: func(m *Moment) { m.Sessions = map[string]int{} },
			want: "no FetchSession started"},
		{name: "the worker hit runs none", needs: needWorker, edit: func(m *Moment) { m.Sessions = map[string]int{workerIdentity(0): 8} },
			want: "chaos-worker-1 ran no FetchSession (8 started elsewhere)"},
		{name: "no worker to hit", needs: needWorker, edit: func(m *Moment) { m.Worker, m.Sessions = "", map[string]int{} },
			want: "no worker runs a FetchSession"},
		{name: "idle worker, lease needed too", needs: needLeases | needWorker,
			edit: func(m *Moment) { m.Stats.InFlight = 0; m.Sessions = map[string]int{workerIdentity(0): 8} },
			want: "no lease in flight (8 sessions, 900 deliveries held)\nchaos-worker-1 ran no FetchSession"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := busy()
			tc.edit(&m)
			err := verdict(tc.needs, m)
			switch {
			case tc.want == "" && err != nil:
				require.FailNowf(t, "unexpected verdict", "verdict: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				require.FailNowf(t, "unexpected verdict", "verdict: %v, want an error containing %q", err, tc.want)
			case err != nil && errors.Is(err, await.ErrFinal) != tc.final:
				require.FailNowf(t, "wrong finality of the verdict", "verdict: %v: final %v, want %v", err, errors.Is(err, await.ErrFinal), tc.final)
			}
		})
	}
}

func TestBusiestWorker(t *testing.T) {
	for _, tc := range []struct {
		sessions map[string]int
		want     string
	}{
		{nil, ""},
		{map[string]int{workerIdentity(0): 0}, ""},
		{map[string]int{workerIdentity(0): 2, workerIdentity(1): 6}, workerIdentity(1)},
		{map[string]int{workerIdentity(1): 4, workerIdentity(0): 4}, workerIdentity(0)},
	} {
		assert.Equalf(t, tc.want, busiestWorker(tc.sessions), "busiestWorker(%v)", tc.sessions)
	}
}

// Every row needs a lease in flight, and a row that hits a worker needs
// that worker to run a session.
func TestEveryFaultNeedsWorkInFlight(t *testing.T) {
	for _, f := range Faults() {
		assert.Falsef(t, f.needs&needLeases == 0, "%s: needs no lease in flight", f.Name)
		assert.Falsef(t, f.pick != nil && f.needs&needWorker == 0, "%s: hits a worker without needing it to run a session", f.Name)
		assert.Falsef(t, f.needs&needWorker != 0 && f.pick == nil, "%s: needs a worker's session but picks no worker", f.Name)
	}
}

func TestResultRecordsTheMoment(t *testing.T) {
	r := Result{InFlight: -1}
	r.record(Moment{})
	require.Falsef(t, r.InFlight != -1 || r.Left != 0, "record of a moment never measured: %+v, want -1 in flight", r)
	r.record(busy())
	require.Falsef(t, r.Left != 1200 || r.InFlight != 4 || r.Sessions != 3 || r.Worker != workerIdentity(1),
		"record: %+v, want 1200 left, 4 in flight, 3 sessions on %s", r, workerIdentity(1))
	m := busy()
	m.Worker, m.StatsErr = "", errors.New("refused")
	r.record(m)
	require.Falsef(t, r.InFlight != -1 || r.Sessions != 8 || r.Worker != "", "record without stats or worker: %+v, want -1 in flight, 8 sessions", r)
}

func TestTableSaysFail(t *testing.T) {
	ok := Result{Fault: "kafka-outage", What: "gated", InFlight: 20, Sessions: 8, Resumed: -1}
	for _, tc := range []struct {
		name string
		r    Result
		want string
	}{
		{"passed", ok, "| ok | kafka-outage: gated | kafka |"},
		{"missing on the web", func(r Result) Result { r.MissingWeb = 1; return r }(ok), "| FAIL |"},
		{"missing in the sink", func(r Result) Result { r.MissingSink = 1; return r }(ok), "| FAIL |"},
		{"no work in flight", func(r Result) Result {
			r.InFlight, r.Err = -1, errors.New("no moment when the fault hits work in flight")
			return r
		}(ok), "| FAIL | kafka-outage: gated | kafka | 0 | 0 | ? | 8 |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Sink = "kafka"
			var b bytes.Buffer
			PrintTable(&b, Options{}, []Result{tc.r})
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			require.Falsef(t, len(lines) != 3 || !strings.HasPrefix(lines[2], tc.want), "table:\n%s\nwant its row to start %q", b.String(), tc.want)
			failed := strings.HasPrefix(lines[2], "| FAIL")
			require.Equalf(t, tc.r.Failed(), failed, "row says FAIL %v, Failed() %v", failed, tc.r.Failed())
		})
	}
}

func TestScrapeGauges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP drover_scheduler_seen_store_compactions Compactions of the seen store running now.
drover_scheduler_seen_store_compactions 1
drover_scheduler_leases_in_flight{campaign="chaos-a-1"} 0
drover_scheduler_leases_in_flight{campaign="chaos-b-2"} 17
`)
	}))
	defer srv.Close()
	const running, leases = "drover_scheduler_seen_store_compactions", `drover_scheduler_leases_in_flight{campaign="chaos-b-2"}`
	v, err := metrics.ScrapeGauges(context.Background(), srv.URL, running, leases)
	require.Falsef(t, err != nil || v[running] != 1 || v[leases] != 17, "scrapeGauges: %v, %v; want 1 compaction and 17 leases", v, err)
	_, err = metrics.ScrapeGauges(context.Background(), srv.URL, `drover_scheduler_leases_in_flight{campaign="chaos-c-3"}`)
	require.Error(t, err, "scrapeGauges of a campaign the scrape lacks: no error")
}
