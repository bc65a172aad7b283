package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testPostgresURI is the test database: 127.0.0.1:5432, trust auth.
const testPostgresURI = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testTable returns a table name unique to this run, dropped at cleanup.
func testTable(t testing.TB) string {
	t.Helper()
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
	if err != nil {
		t.Fatalf("PostgreSQL at %s is needed for this test: %v", testPostgresURI, err)
	}
	return s
}

func TestPostgresStoresEveryPageByteIdentical(t *testing.T) {
	table := testTable(t)
	s := newTestPostgres(t, table)
	pages := testPages(t, 200)
	// Text PostgreSQL cannot hold must not fail the page (nor its batch).
	pages[7].Err, pages[7].StatusLine = "bad \x00 byte", "HTTP/1.1 200 \xff\xfe"
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
		var g Page
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
		e.StatusLine, e.Err = pgText(p.StatusLine), pgText(p.Err)
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
