package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/page"
)

// testPostgresURI is the test database: 127.0.0.1:5432, trust auth.
const testPostgresURI = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testTable returns a table name unique to this run, dropped at cleanup.
// Every test of the PostgreSQL sink starts with it: it skips them under
// -short.
func testTable(t testing.TB) string {
	t.Helper()
	testenv.NeedsPostgres(t)
	name := fmt.Sprintf("drover_pages_test_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testPostgresURI)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
	})
	return name
}

func newTestPostgres(t testing.TB, table string) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := NewPostgres(ctx, PostgresConfig{URI: testPostgresURI, Table: table})
	require.NoError(t, err, "PostgreSQL at %s is needed for this test", testPostgresURI)
	return s
}

func TestPostgresStoresEveryPageByteIdentical(t *testing.T) {
	table := testTable(t)
	s := newTestPostgres(t, table)
	pages := testPages(t, 200)
	// Text PostgreSQL cannot hold must not fail the page (nor its batch):
	// NUL bytes are dropped, and a run of invalid UTF-8 becomes one U+FFFD.
	// The expectations are literals, not the sanitiser's own output.
	pages[7].Err, pages[7].StatusLine = "bad \x00 byte", "HTTP/1.1 200 \xff\xfe"
	sanitised := map[string][2]string{ // URL -> status line, error as stored
		pages[7].URL: {"HTTP/1.1 200 \uFFFD", "bad  byte"},
	}
	storeAll(t, s, pages)
	require.NoError(t, s.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testPostgresURI)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT campaign, url, status, status_line, headers, body, content_type,
		content_encoding, truncated, fetched_at, depth, parent, ip, error FROM `+pgx.Identifier{table}.Sanitize())
	require.NoError(t, err)
	want := byURL(pages)
	n := 0
	for rows.Next() {
		var g page.Page
		require.NoError(t, rows.Scan(&g.Campaign, &g.URL, &g.Status, &g.StatusLine, &g.Header, &g.Body, &g.ContentType,
			&g.ContentEncoding, &g.Truncated, &g.FetchedAt, &g.Depth, &g.Parent, &g.IP, &g.Err))
		n++
		p := want[g.URL]
		require.NotNil(t, p, "row for unknown URL %q", g.URL)
		delete(want, g.URL)
		require.True(t, string(p.Body) == string(g.Body), "body of %s differs", p.URL)
		require.True(t, string(p.Header) == string(g.Header), "headers of %s differ", p.URL)
		require.True(t, g.FetchedAt.Equal(p.FetchedAt.Truncate(time.Microsecond)), "fetched_at of %s", p.URL)
		e := *p
		if w, ok := sanitised[p.URL]; ok {
			e.StatusLine, e.Err = w[0], w[1]
		}
		require.Equal(t, e.StatusLine, g.StatusLine, "status line of %s", p.URL)
		require.Equal(t, e.Err, g.Err, "error of %s", p.URL)
		g.Header, g.Body, g.FetchedAt, g.Request = e.Header, e.Body, e.FetchedAt, e.Request
		require.Equal(t, e, g, p.URL)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(pages), n, "rows")
	require.Empty(t, want, "pages without a row")
}

func TestPostgresUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := freeAddr(t)
	_, err := NewPostgres(ctx, PostgresConfig{URI: "postgres://postgres@" + addr + "/test?connect_timeout=5"})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "postgres "+addr+" unreachable")
}

func TestPostgresRefusesBadTableName(t *testing.T) {
	_, err := NewPostgres(context.Background(), PostgresConfig{URI: testPostgresURI, Table: "pages; DROP TABLE x"})
	require.ErrorContains(t, err, "must be name or schema.name")
}

// pgRows returns the URLs stored in table, with their row counts.
func pgRows(t *testing.T, table string) map[string]int {
	t.Helper()
	got := map[string]int{}
	withConn(t, func(ctx context.Context, conn *pgx.Conn) {
		rows, err := conn.Query(ctx, `SELECT url FROM `+pgx.Identifier{table}.Sanitize())
		require.NoError(t, err)
		for rows.Next() {
			var u string
			require.NoError(t, rows.Scan(&u))
			got[u]++
		}
		require.NoError(t, rows.Err())
	})
	return got
}

// pgExec runs sql on a connection of its own.
func pgExec(t *testing.T, sql string, args ...any) {
	t.Helper()
	withConn(t, func(ctx context.Context, conn *pgx.Conn) {
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	})
}

// withConn runs f on a connection of its own to the test database, closed
// after; ctx gives f at most 10 s.
func withConn(t *testing.T, f func(ctx context.Context, conn *pgx.Conn)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testPostgresURI)
	require.NoError(t, err)
	defer conn.Close(ctx)
	f(ctx, conn)
}

// A batch in which the server refuses one row (here a CHECK constraint)
// stores every other row of it; the refused page's error is ErrRejected,
// which the fetcher does not retry.
func TestPostgresBatchWithOneBadRow(t *testing.T) {
	table := testTable(t)
	s := newTestPostgres(t, table)
	defer s.Close()
	pgExec(t, `ALTER TABLE `+pgx.Identifier{table}.Sanitize()+` ADD CONSTRAINT no_refused CHECK (url NOT LIKE '%refused%')`)
	pages := testPages(t, 8)
	const bad = 5
	pages[bad].URL = "http://site5.test/refused"

	// One COPY of the whole batch, as the batcher's worker 0 runs it.
	items := make([]pgItem, len(pages))
	for i, p := range pages {
		row, err := pgRow(p, s.cfg.MaxBody)
		require.NoError(t, err)
		items[i] = pgItem{row: row}
	}
	errs := s.flush(0, items)
	require.Equal(t, len(pages), len(errs), "one error per page")
	for i, err := range errs {
		if i == bad {
			require.ErrorIs(t, err, ErrRejected, "the refused row")
			require.True(t, Permanent(err), "a refused row is permanent")
			continue
		}
		require.NoError(t, err, "page %d of the batch", i)
	}
	want := map[string]int{}
	for i, p := range pages {
		if i != bad {
			want[p.URL] = 1
		}
	}
	require.Equal(t, want, pgRows(t, table), "rows after the batch")

	// Through Store, the refusal names the page and stays permanent.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Store(ctx, pages[bad])
	require.ErrorIs(t, err, ErrRejected)
	require.ErrorContains(t, err, pages[bad].URL)
}

// pgReconnectWithin bounds how long Stores may fail after the sink's
// connection was killed: the first one after the kill may fail (it finds
// the connection dead), a later one reconnects.
const pgReconnectWithin = 10 * time.Second

// A connection the server kills (pg_terminate_backend, as a restart or a
// failover does) is replaced: the Store that finds it dead fails with an
// error that is not permanent (the fetcher retries it), and a later Store
// commits on a new connection.
func TestPostgresReconnectsAfterKilledConnection(t *testing.T) {
	table := testTable(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := NewPostgres(ctx, PostgresConfig{URI: testPostgresURI, Table: table, Conns: 1})
	require.NoError(t, err)
	defer s.Close()
	pages := testPages(t, 3)
	require.NoError(t, s.Store(ctx, pages[0]))
	pid := s.conns[0].PgConn().PID()

	pgExec(t, `SELECT pg_terminate_backend($1)`, pid)
	// pg_terminate_backend only signals the backend: wait until it is gone,
	// so the next Store cannot slip through on it.
	await.For(t, pgReconnectWithin, 20*time.Millisecond, fmt.Sprintf("backend %d gone after pg_terminate_backend", pid), func() error {
		var n int
		conn, err := pgx.Connect(ctx, testPostgresURI)
		require.NoError(t, err)
		err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n)
		conn.Close(ctx)
		require.NoError(t, err)
		if n > 0 {
			return fmt.Errorf("backend %d still in pg_stat_activity", pid)
		}
		return nil
	})
	var failures []error
	await.For(t, pgReconnectWithin, 100*time.Millisecond, "a Store to succeed after the kill", func() error {
		err := s.Store(ctx, pages[1])
		if err == nil {
			return nil
		}
		require.True(t, !Permanent(err), "a killed connection made the page permanent: %v", err)
		failures = append(failures, err)
		return fmt.Errorf("%d Stores failed, the first with %v, the last with %w", len(failures), failures[0], err)
	})
	t.Logf("%d Stores failed after the kill: %v", len(failures), failures)
	require.True(t, len(failures) <= 1, "%d Stores failed after the kill, want at most the one that found the connection dead", len(failures))
	require.True(t, s.conns[0] != nil && s.conns[0].PgConn().PID() != pid, "the sink still uses the killed backend %d", pid)
	require.NoError(t, s.Store(ctx, pages[2]))
	require.Equal(t, map[string]int{pages[0].URL: 1, pages[1].URL: 1, pages[2].URL: 1}, pgRows(t, table))
}
