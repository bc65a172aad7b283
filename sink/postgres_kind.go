package sink

import (
	"context"
	"fmt"
	"net/url"
)

// openPostgres is Open of a postgres:// or postgresql:// URI.
func openPostgres(ctx context.Context, uri string, opts Options) (Sink, error) {
	u, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	cfg, err := postgresConfig(u, opts)
	if err != nil {
		return nil, err
	}
	return orNil(NewPostgres(ctx, cfg))
}

// checkPostgres is Check of a postgres:// URI.
func checkPostgres(ctx context.Context, uri string, opts Options) error {
	u, err := parseURI(uri)
	if err != nil {
		return err
	}
	cfg, err := postgresConfig(u, opts)
	if err != nil {
		return err
	}
	s, err := newPostgres(cfg)
	if err != nil {
		return err
	}
	s.pgcfg.ConnectTimeout = checkDialTimeout
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres %s: %w", s.addr, err)
	}
	// Rolled back on purpose: a check changes nothing.
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := s.ddl(ctx, tx); err != nil {
		return fmt.Errorf("postgres %s: cannot create table %s: %w; create it, grant the workers' role CREATE on its schema, or pick another ?table=",
			s.addr, s.cfg.Table, err)
	}
	return nil
}

// postgresConfig reads a postgres:// URI: its table= and max_body=
// parameters are ours, the others are pgx's.
func postgresConfig(u *url.URL, opts Options) (PostgresConfig, error) {
	q := u.Query()
	table := opts.Table
	if t := q.Get("table"); t != "" {
		table = t
	}
	cfg := PostgresConfig{Table: table, BodyCap: opts.BodyCap}
	var err error
	if cfg.MaxBody, err = parseMaxBody(u, q.Get("max_body")); err != nil {
		return cfg, err
	}
	q.Del("table") // pgx would send them to the server as settings
	q.Del("max_body")
	v := *u
	v.RawQuery = q.Encode()
	cfg.URI = v.String()
	return cfg, nil
}
