package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/sink/sinkuri"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgresConfig configures a PostgreSQL sink. Zero values take the defaults.
type PostgresConfig struct {
	// URI is a postgres:// URI without a password: pgx takes credentials
	// from the environment (PGPASSWORD, PGPASSFILE, PGUSER, ...).
	URI string
	// Table is "name" or "schema.name" (default drover_pages); it is created
	// if missing.
	Table string
	// Conns is the number of connections, each running one COPY at a time
	// (default 2).
	Conns int
	// MaxBatch is the most pages in one COPY (default 256).
	MaxBatch int
	// FlushTimeout bounds one batch's COPY (default 30s).
	FlushTimeout time.Duration
	// BodyCap is the campaign's body cap (0: none); MaxBody follows it
	// when unset.
	BodyCap int64
	// MaxBody is the largest body a row carries (the URI's max_body=;
	// default BodyCap, or DefaultMaxBody when the campaign has no cap). A
	// larger body is not cut: its row is a pointer (see NewPostgres).
	MaxBody int64
}

// Postgres is a Sink inserting one row per page into a table (see
// NewPostgres for its columns). Concurrent Stores are grouped into one COPY
// per batch; COPY is one statement, committed when it returns.
//
// It holds Conns plain pgx connections, one per batch worker, rather than a
// pgxpool.Pool: each worker needs exactly one connection for its COPYs, and
// pgxpool's dependency (jackc/puddle) is not in the module's go.sum.
type Postgres struct {
	cfg   PostgresConfig
	pgcfg *pgx.ConnConfig
	table pgx.Identifier
	addr  string
	conns []*pgx.Conn // conns[i] is owned by batch worker i; nil until needed
	b     *batcher[pgItem]
}

// pgItem is a page's row, made by its Store, and the bytes it weighs in
// a batch.
type pgItem struct {
	row  []any
	size int
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

var pgColumns = []string{"campaign", "url", "status", "status_line", "headers", "body", "content_type",
	"content_encoding", "truncated", "fetched_at", "depth", "parent", "ip", "error",
	"revisit_profile", "refers_to_url", "refers_to_date", "payload_digest",
	"body_size", "body_omitted", "warc_filename", "warc_offset"}

// pgLaterColumns are the columns a table created by an older drover lacks,
// with their types; ddl adds them. All are nullable.
var pgLaterColumns = [][2]string{
	{"revisit_profile", "text"},
	{"refers_to_url", "text"},
	{"refers_to_date", "timestamptz"},
	{"payload_digest", "text"},
	{"body_size", "bigint"},
	{"body_omitted", "text"},
	{"warc_filename", "text"},
	{"warc_offset", "bigint"},
}

// NewPostgres connects, creates the table if missing, and returns the sink.
// The table:
//
//	id bigserial primary key, campaign text, url text, status int,
//	status_line text, headers bytea (the raw header block), body bytea,
//	content_type text, content_encoding text, truncated bool,
//	fetched_at timestamptz, depth int, parent text, ip text, error text,
//	revisit_profile text, refers_to_url text, refers_to_date timestamptz,
//	payload_digest text, body_size bigint, body_omitted text,
//	warc_filename text, warc_offset bigint
//
// with an index on (campaign, url) for consumers that drop duplicates.
// Text columns get invalid UTF-8 replaced and NUL bytes removed (PostgreSQL
// text cannot hold them); headers and body are bytea, byte for byte.
//
// payload_digest is the body's page.PayloadDigest ("sha1:" + base32) on
// every row with a response, NULL on a failure's. A revisit (Page.Revisit:
// the content was found unchanged since an earlier capture) is a row with
// no body, this fetch's status and headers (a 304's, or a 200's),
// revisit_profile (server-not-modified or identical-payload-digest), and
// refers_to_url, refers_to_date and payload_digest equal to the url,
// fetched_at and payload_digest of the earlier capture's row, which it
// joins on; the other rows have NULL in the three revisit columns.
//
// body_size is the body's length on every row with a response. A body
// larger than MaxBody is never cut: its row has a NULL body, body_omitted
// 'too-large' (BodyTooLarge; NULL on the other rows), payload_digest and
// body_size of the whole body, and, when a WARC sink of the campaign
// stored the page first (see Multi), warc_filename and warc_offset: the
// response record's file and gzip member offset.
//
// A table created by an older drover lacks the last eight columns: they
// are added (ALTER TABLE ... ADD COLUMN IF NOT EXISTS, PostgreSQL 9.6 or
// later) when missing, and only then, since ALTER TABLE waits for every
// reader of the table and holds back every writer meanwhile.
func NewPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	s, err := newPostgres(cfg)
	if err != nil {
		return nil, err
	}
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.createTable(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	s.conns[0] = conn
	s.b = newBatcher(s.cfg.Conns, s.cfg.MaxBatch, func(it pgItem) int { return it.size }, s.flush)
	return s, nil
}

// newPostgres checks and defaults cfg; the result has no connection yet.
func newPostgres(cfg PostgresConfig) (*Postgres, error) {
	if cfg.Table == "" {
		cfg.Table = "drover_pages"
	}
	if !tableName.MatchString(cfg.Table) {
		return nil, fmt.Errorf("postgres sink: table %q: must be name or schema.name (letters, digits, _)", cfg.Table)
	}
	cfg.Conns = positiveOr(cfg.Conns, 2)
	cfg.MaxBatch = positiveOr(cfg.MaxBatch, 256)
	cfg.FlushTimeout = positiveOr(cfg.FlushTimeout, 30*time.Second)
	cfg.MaxBody = positiveOr(cfg.MaxBody, positiveOr(cfg.BodyCap, DefaultMaxBody))
	pgcfg, err := pgx.ParseConfig(cfg.URI)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	return &Postgres{
		cfg: cfg, pgcfg: pgcfg, table: pgx.Identifier(strings.Split(cfg.Table, ".")),
		addr: fmt.Sprintf("%s:%d", pgcfg.Host, pgcfg.Port), conns: make([]*pgx.Conn, cfg.Conns),
	}, nil
}

func (s *Postgres) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pgcfg)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) { // the server answered: auth, database, ...
			return nil, fmt.Errorf("postgres %s: %w", s.addr, err)
		}
		return nil, fmt.Errorf("postgres %s unreachable: %v (start PostgreSQL, e.g. `docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres`; credentials come from PGPASSWORD/PGPASSFILE, never the URI): %w", s.addr, err, ErrUnreachable)
	}
	return conn, nil
}

// createTable creates the table and its index if missing, adds the columns
// an older drover's table lacks, and commits.
func (s *Postgres) createTable(ctx context.Context, conn *pgx.Conn) error {
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return s.ddl(ctx, tx) }); err != nil {
		return fmt.Errorf("postgres %s: create table %s: %w", s.addr, s.cfg.Table, err)
	}
	return nil
}

// ddl creates the table and its index in tx, if missing, and adds the
// columns an older drover's table lacks. It runs under an advisory lock:
// concurrent CREATE TABLE IF NOT EXISTS from several workers can fail with
// a unique violation in pg_type.
func (s *Postgres) ddl(ctx context.Context, tx pgx.Tx) error {
	t := s.table.Sanitize()
	idx := pgx.Identifier{s.table[len(s.table)-1] + "_campaign_url_idx"}.Sanitize()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "drover-sink-ddl:"+s.cfg.Table); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
	id bigserial PRIMARY KEY,
	campaign text NOT NULL,
	url text NOT NULL,
	status integer NOT NULL,
	status_line text NOT NULL,
	headers bytea,
	body bytea,
	content_type text NOT NULL,
	content_encoding text NOT NULL,
	truncated boolean NOT NULL,
	fetched_at timestamptz NOT NULL,
	depth integer NOT NULL,
	parent text NOT NULL,
	ip text NOT NULL,
	error text NOT NULL`+pgLaterColumnsSQL(",\n\t")+`
)`)
	if err != nil {
		return err
	}
	if _, err = tx.Exec(ctx, `CREATE INDEX IF NOT EXISTS `+idx+` ON `+t+` (campaign, url)`); err != nil {
		return err
	}
	return s.addLaterColumns(ctx, tx)
}

// pgLaterColumnsSQL is the definitions of pgLaterColumns, each after sep.
func pgLaterColumnsSQL(sep string) string {
	var b strings.Builder
	for _, c := range pgLaterColumns {
		b.WriteString(sep + c[0] + " " + c[1])
	}
	return b.String()
}

// addLaterColumns adds to the table the pgLaterColumns it lacks, created
// by an older drover, in one ALTER TABLE; a table that has them all is
// left alone.
func (s *Postgres) addLaterColumns(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped`,
		s.table.Sanitize())
	if err != nil {
		return err
	}
	has, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var add []string
	for _, c := range pgLaterColumns {
		if !slices.Contains(has, c[0]) {
			add = append(add, "ADD COLUMN IF NOT EXISTS "+c[0]+" "+c[1])
		}
	}
	if len(add) == 0 {
		return nil
	}
	alter := `ALTER TABLE ` + s.table.Sanitize() + ` ` + strings.Join(add, ", ")
	if _, err := tx.Exec(ctx, alter); err != nil {
		return fmt.Errorf("adding the columns an older drover did not create: %w; run as the table's owner: %s", err, alter)
	}
	return nil
}

// Store returns nil once p's row is committed. When ctx ends first the row
// may still be committed (a duplicate on retry). p must not be modified after
// the call.
func (s *Postgres) Store(ctx context.Context, p *page.Page) error {
	row, err := pgRow(p, s.cfg.MaxBody)
	if err == nil {
		size := len(p.Header)
		if p.BodySize() <= s.cfg.MaxBody {
			size += int(p.BodySize())
		}
		err = s.b.store(ctx, pgItem{row: row, size: size})
	}
	if err != nil {
		return fmt.Errorf("postgres %s table %s: store %s: %w", s.addr, s.cfg.Table, p.URL, err)
	}
	p.Stored.Add(page.Location{Kind: sinkuri.Postgres.Name, Table: s.cfg.Table})
	return nil
}

// flush COPYs a batch on worker i's connection. If the batch fails while
// the connection is fine (a row the server refuses), the pages are retried
// one by one so that one bad page does not fail the others.
// BodyLimit is MaxBody: Multi stores a page with a larger body in the
// campaign's WARC sinks first, so that its pointer row names the WARC
// record.
func (s *Postgres) BodyLimit() int64 { return s.cfg.MaxBody }

func (s *Postgres) flush(i int, pages []pgItem) []error {
	err := s.copy(i, pages)
	if err == nil {
		return nil
	}
	if len(pages) == 1 || s.conns[i] == nil {
		return allErr(len(pages), err)
	}
	errs := make([]error, len(pages))
	for j, p := range pages {
		errs[j] = s.copy(i, []pgItem{p})
	}
	return errs
}

func (s *Postgres) copy(i int, pages []pgItem) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.FlushTimeout)
	defer cancel()
	if s.conns[i] == nil {
		conn, err := s.connect(ctx)
		if err != nil {
			return err
		}
		s.conns[i] = conn
	}
	conn := s.conns[i]
	_, err := conn.CopyFrom(ctx, s.table, pgColumns, pgx.CopyFromSlice(len(pages), func(j int) ([]any, error) {
		return pages[j].row, nil
	}))
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || conn.IsClosed() {
			// Not the server refusing the rows: the connection is suspect.
			conn.Close(context.Background())
			s.conns[i] = nil
			return err
		}
		if len(pages) == 1 && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) {
			// A data exception or an integrity violation of this one row.
			return fmt.Errorf("%w: %v", ErrRejected, err)
		}
		return err
	}
	return nil
}

// pgRow is p's row, in the order of pgColumns; a spooled body no larger
// than maxBody is read into it.
func pgRow(p *page.Page, maxBody int64) ([]any, error) {
	body := p.Body
	var profile, refersTo, refersDate, digest, size, omitted, warcFile, warcOffset any // NULL unless set
	switch r := p.Revisit; {
	case r != nil: // no body: the content is the earlier capture's
		body = nil
		profile, refersTo, digest = pgText(r.Profile), pgText(r.RefersToURI), pgText(r.Digest)
		if !r.RefersToDate.IsZero() {
			refersDate = r.RefersToDate
		}
	case p.Status != 0:
		digest, size = p.BodyDigest(), p.BodySize()
		if p.BodySize() > maxBody {
			body, omitted = nil, BodyTooLarge
			if p.WARC != nil {
				warcFile, warcOffset = pgText(p.WARC.File), p.WARC.Offset
			}
		} else if p.BodyFile != nil {
			b, err := io.ReadAll(p.BodyReader())
			if err != nil {
				return nil, fmt.Errorf("reading the spooled body: %w", err)
			}
			body = b
		}
	}
	return []any{pgText(p.Campaign), pgText(p.URL), p.Status, pgText(p.StatusLine), p.Header, body,
		pgText(p.ContentType), pgText(p.ContentEncoding), p.Truncated, p.FetchedAt, p.Depth,
		pgText(p.Parent), pgText(p.IP), pgText(p.Err), profile, refersTo, refersDate, digest,
		size, omitted, warcFile, warcOffset}, nil
}

func pgText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// Close waits for the batch in flight and closes the connections.
func (s *Postgres) Close() error {
	s.b.close()
	for i, c := range s.conns {
		if c != nil {
			c.Close(context.Background())
			s.conns[i] = nil
		}
	}
	return nil
}
