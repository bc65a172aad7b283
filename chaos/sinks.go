package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nlnwa/gowarc"
)

// The sinks a row counts in: Kafka (default), PostgreSQL through a proxy
// that cuts, WARC files on a small tmpfs.
const (
	sinkKafka    = "kafka"
	sinkPostgres = "postgres"
	sinkWARC     = "warc"
)

// pgSink is the postgres row's sink: a table of its own, written through a
// proxy the fault cuts; counted directly.
type pgSink struct {
	proxy *Proxy
	addr  string
	table string
}

func (r *rig) usePostgres(ctx context.Context) (*pgSink, error) {
	p, err := NewProxy("127.0.0.1:0", r.opts.PostgresAddr)
	if err != nil {
		return nil, err
	}
	r.cleanup = append(r.cleanup, func() { p.Close() })
	s := &pgSink{proxy: p, addr: r.opts.PostgresAddr, table: fmt.Sprintf("drover_chaos_%d", rand.IntN(1e9))}
	r.sinks = []string{"postgres://postgres@" + p.Addr() + "/test?table=" + s.table}
	r.cleanup = append(r.cleanup, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := s.conn(ctx); err == nil {
			c.Exec(ctx, "DROP TABLE IF EXISTS "+s.table)
			c.Close(ctx)
		}
	})
	return s, nil
}

func (s *pgSink) conn(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, "postgres://postgres@"+s.addr+"/test")
}

// count counts the campaign's rows by URL.
func (s *pgSink) count(ctx context.Context, id string) (map[string]int, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT url, count(*) FROM "+s.table+" WHERE campaign = $1 AND status > 0 GROUP BY url", id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var u string
		var n int
		if err := rows.Scan(&u, &n); err != nil {
			return nil, err
		}
		got[u] = n
	}
	return got, rows.Err()
}

// warcSink is the WARC row's sink: a directory on a tmpfs of its own that
// the fault fills up.
type warcSink struct {
	dir    string
	filler string
}

func (r *rig) useWARC() (*warcSink, error) {
	mnt := filepath.Join(r.dir, "warc")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", mnt).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount tmpfs on %s (needs root): %v: %s", mnt, err, out)
	}
	r.cleanup = append(r.cleanup, func() { exec.Command("umount", "-l", mnt).Run() })
	s := &warcSink{dir: filepath.Join(mnt, "pages"), filler: filepath.Join(mnt, "filler")}
	r.sinks = []string{"warc:" + s.dir}
	return s, nil
}

// fill writes the filler file until the tmpfs is full.
func (s *warcSink) fill() error {
	f, err := os.Create(s.filler)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

func (s *warcSink) free() error { return os.Remove(s.filler) }

// count counts response records by target URI.
func (s *warcSink) count() (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(s.dir, "*.warc.gz"))
	if err != nil {
		return nil, err
	}
	got := map[string]int{}
	for _, f := range files {
		r, err := gowarc.NewWarcFileReader(f, 0)
		if err != nil {
			return nil, err
		}
		for {
			rec, _, _, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if rec.Type() == gowarc.Response {
				got[rec.WarcHeader().Get(gowarc.WarcTargetURI)]++
			}
			rec.Close()
		}
		r.Close()
	}
	return got, nil
}
