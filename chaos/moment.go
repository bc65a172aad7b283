package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// need says what a fault must find in flight to hit work in flight. Every
// fault needs pages still missing on the web and the campaign running.
type need uint8

const (
	// needLeases: the scheduler the rig reads (the one faults hit) has
	// leases out: URLs handed to fetchers whose outcomes it has not had.
	needLeases need = 1 << iota
	// needSessions: Temporal has a FetchSession activity started on some
	// worker.
	needSessions
	// needWorker: the worker the fault hits (Moment.Worker) runs a started
	// FetchSession.
	needWorker
)

// Moment is what the rig measured just before a fault, in this order: the
// web's pages missing, the campaign's workflow and its FetchSession
// activities in Temporal, the scheduler's stats.
type Moment struct {
	// Missing: pages of the web never requested.
	Missing int
	// Status of the campaign's workflow; DescribeErr when it could not be
	// read.
	Status      enums.WorkflowExecutionStatus
	DescribeErr error
	// Sessions: FetchSession activities in state STARTED, by the identity
	// of the worker that runs them.
	Sessions map[string]int
	// Worker: the worker the fault hits (empty when the fault hits none).
	Worker string
	// ID: the campaign's ID, the label of its series in the scheduler's
	// metrics; Key: its frontier key, which the stats were read under;
	// StatsErr when they could not be read.
	ID, Key  string
	Stats    session.Stats
	StatsErr error
}

// known: the scheduler's stats are of a campaign it runs (a scheduler
// answers a key it does not know with zeros). A lease in flight has its
// session and its delivery held, so InFlight, which a fault's ready
// condition may refresh from elsewhere, is left out.
func (m Moment) known() bool {
	return m.Stats.Sessions > 0 || m.Stats.Fetched > 0 || m.Stats.Held > 0
}

// sessions is the number of started FetchSessions on every worker.
func (m Moment) sessions() int {
	n := 0
	for _, k := range m.Sessions {
		n += k
	}
	return n
}

// verdict says why a fault at m would not hit work in flight, or nil. An
// error wrapping await.ErrFinal says waiting will not help: the crawl is
// over.
func verdict(n need, m Moment) error {
	if m.Missing == 0 {
		return fmt.Errorf("%w: the web had no page missing: the crawl was over", await.ErrFinal)
	}
	switch {
	case m.DescribeErr != nil:
		return fmt.Errorf("campaign not described: %w", m.DescribeErr)
	case m.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return fmt.Errorf("%w: the campaign was %s, %d pages missing", await.ErrFinal, m.Status, m.Missing)
	case m.StatsErr != nil:
		return fmt.Errorf("scheduler stats of %s not read: %w", m.Key, m.StatsErr)
	case !m.known():
		return fmt.Errorf("the scheduler reports no session, page or delivery of %s: not its campaign", m.Key)
	}
	var errs []error
	if n&needLeases != 0 && m.Stats.InFlight <= 0 {
		errs = append(errs, fmt.Errorf("the scheduler had no lease in flight (%d sessions, %d deliveries held)", m.Stats.Sessions, m.Stats.Held))
	}
	if n&needSessions != 0 && m.sessions() == 0 {
		errs = append(errs, errors.New("Temporal had no FetchSession started"))
	}
	if n&needWorker != 0 {
		switch {
		case m.Worker == "":
			errs = append(errs, fmt.Errorf("no worker runs a FetchSession (%d started)", m.sessions()))
		case m.Sessions[m.Worker] == 0:
			errs = append(errs, fmt.Errorf("%s ran no FetchSession (%d started elsewhere)", m.Worker, m.sessions()))
		}
	}
	return errors.Join(errs...)
}

// busiestWorker is the worker that runs the most started FetchSessions
// (the first by name of those tied), or "" when none runs one.
func busiestWorker(sessions map[string]int) string {
	best, most := "", 0
	names := make([]string, 0, len(sessions))
	for w := range sessions {
		names = append(names, w)
	}
	slices.Sort(names)
	for _, w := range names {
		if sessions[w] > most {
			best, most = w, sessions[w]
		}
	}
	return best
}

// momentWithin bounds the wait for a moment when the fault hits work in
// flight. A politeness-bound crawl hands out leases every per-host delay,
// so one comes within a second while the crawl runs; a compaction may
// take longer to come.
const momentWithin = 2 * time.Minute

// statsWithin bounds one read of the scheduler's stats: a few ms on an
// idle machine, seconds on a loaded one.
const statsWithin = 10 * time.Second

// remeasureEvery is how often awaitMoment measures again while it checks a
// fault's ready condition (a scrape) every 2 ms.
const remeasureEvery = 250 * time.Millisecond

// awaitMoment measures, again and again, until f would hit work in flight
// (and f.ready holds), and returns the last measurement. The fault must
// follow at once: a lease measured out is back within tens of
// milliseconds.
func (r *rig) awaitMoment(ctx context.Context, f Fault, id, key string) (Moment, error) {
	var m Moment
	var at time.Time
	checks := 0
	// Polled every 2 ms: a measurement, and a compaction may be brief.
	err := await.Until(ctx, momentWithin, 2*time.Millisecond, func() error {
		checks++
		if f.ready == nil || time.Since(at) >= remeasureEvery {
			m, at = r.measure(ctx, id, key, f.pick), time.Now()
		}
		if err := verdict(f.needs, m); f.ready == nil || errors.Is(err, await.ErrFinal) {
			return err
		}
		if err := f.ready(ctx, r, &m); err != nil {
			return err
		}
		return verdict(f.needs, m)
	})
	if err != nil {
		return m, fmt.Errorf("no moment when the fault hits work in flight (%d checks): %w", checks, err)
	}
	r.logf("the fault hits work in flight (check %d): %d pages missing, %d leases in flight, sessions %v, worker %q",
		checks, m.Missing, m.Stats.InFlight, m.Sessions, m.Worker)
	return m, nil
}

// measure reads the moment; pick, when set, names the worker the fault
// will hit from the started sessions.
func (r *rig) measure(ctx context.Context, id, key string, pick func(map[string]int) string) Moment {
	m := Moment{Missing: len(r.web.Missing()), ID: id, Key: key, Sessions: map[string]int{}}
	m.Status, m.DescribeErr = r.describeSessions(ctx, id, m.Sessions)
	if pick != nil {
		m.Worker = pick(m.Sessions)
	}
	sctx, cancel := context.WithTimeout(ctx, statsWithin)
	m.Stats, m.StatsErr = session.Client{Token: chaosToken}.CampaignStats(sctx, []string{r.schedAddr}, key)
	cancel()
	return m
}

// describeSessions returns the campaign's status and counts its started
// FetchSession activities by worker identity into by.
func (r *rig) describeSessions(ctx context.Context, id string, by map[string]int) (enums.WorkflowExecutionStatus, error) {
	dctx, cancel := context.WithTimeout(ctx, statsWithin)
	defer cancel()
	d, err := r.client.DescribeWorkflowExecution(dctx, id, "")
	if err != nil {
		return enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, err
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() == workflows.FetchSessionActivity && pa.GetState() == enums.PENDING_ACTIVITY_STATE_STARTED {
			by[pa.GetLastWorkerIdentity()]++
		}
	}
	return d.GetWorkflowExecutionInfo().GetStatus(), nil
}
