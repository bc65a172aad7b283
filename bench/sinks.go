package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/dirsize"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/sink"
)

// Sinks the sink scenario knows.
var sinkKinds = []string{"kafka", "warc", "postgres"}

// runSink (issue 6) opens one sink as a campaign's fetchers would (sink.Open
// by URI) and has Writers goroutines Store pages of PageBytes for Duration,
// each waiting for its Store to return (durable) before the next, as a
// fetcher goroutine does. Kafka is the in-memory broker (kfake) in this
// process, so its CPU and RSS count here; the sink runs at acks=all. WARC
// writes to a temporary directory (group-commit fsync per batch). PostgreSQL
// gets a table of its own, dropped afterwards.
func runSink(ctx context.Context, j Job) (res Result, err error) {
	if j.Writers <= 0 {
		j.Writers = 64
	}
	if j.PageBytes <= 0 {
		j.PageBytes = 8192
	}
	if j.Duration <= 0 {
		j.Duration = 10 * time.Second
	}
	var uri string
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	dir := ""
	switch j.Sink {
	case "kafka":
		topic := fmt.Sprintf("bench-sink-%d", rand.IntN(1e9))
		k, err := devstack.StartKafka("127.0.0.1:0", topic)
		if err != nil {
			return res, err
		}
		cleanup = append(cleanup, func() { k.Close() })
		uri = "kafka://" + k.Addr() + "/" + topic
	case "warc":
		dir, err = os.MkdirTemp("", "drover-bench-warc-")
		if err != nil {
			return res, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		uri = "warc:" + dir
	case "postgres":
		u, err := url.Parse(j.PostgresURI)
		if err != nil {
			return res, fmt.Errorf("postgres URI: %w", err)
		}
		table := fmt.Sprintf("drover_bench_pages_%d", time.Now().UnixNano())
		q := u.Query()
		q.Set("table", table)
		u.RawQuery = q.Encode()
		uri = u.String()
		cleanup = append(cleanup, func() {
			if err := dropTable(j.PostgresURI, table); err != nil {
				fmt.Fprintf(os.Stderr, "bench: drop table %s: %v\n", table, err)
			}
		})
	default:
		return res, fmt.Errorf("sink %q: want one of %s", j.Sink, strings.Join(sinkKinds, ", "))
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := sink.Open(octx, uri, sink.Options{Campaign: "bench", BodyCap: 1 << 20})
	cancel()
	if err != nil {
		return res, err
	}
	text := benchText(64 << 10)
	hdr := []byte(fmt.Sprintf("Content-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\nServer: testweb\r\n", j.PageBytes))
	var (
		mu       sync.Mutex
		lat      []time.Duration
		records  int64
		firstErr error
		wg       sync.WaitGroup
	)
	sctx, cancel := context.WithTimeout(ctx, j.Duration+time.Minute)
	defer cancel()
	cpu0, _ := selfUsage()
	start := time.Now()
	deadline := start.Add(j.Duration)
	for w := range j.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var my []time.Duration
			var err error
			for n := 0; time.Now().Before(deadline); n++ {
				off := (w*7919 + n*4099) % (len(text) - j.PageBytes)
				p := &page.Page{
					URL: fmt.Sprintf("http://127.0.0.%d:8080/p/%d-%d", 1+w%250, w, n), Campaign: "bench", Status: 200,
					StatusLine: "HTTP/1.1 200 OK", Header: hdr, Body: text[off : off+j.PageBytes],
					ContentType: "text/html; charset=utf-8", FetchedAt: time.Now(), Depth: 2,
					Parent: "http://127.0.0.1:8080/", IP: "127.0.0.1",
					Request: []byte("GET /p HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: drover-bench\r\n\r\n"),
				}
				t0 := time.Now()
				if err = s.Store(sctx, p); err != nil {
					break
				}
				my = append(my, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, my...)
			records += int64(len(my))
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	cpu1, _ := selfUsage()
	res.CPU = cpu1 - cpu0
	res.Records = records
	res.BodyBytes = records * int64(j.PageBytes)
	res.InFlight = j.Writers
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50, res.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	cerr := s.Close()
	if dir != "" {
		res.DiskBytes = dirsize.Of(dir)
	}
	return res, errors.Join(firstErr, cerr)
}

// benchText is n bytes of HTML-like text, varied enough that gzip (WARC's
// per-record compression) sees a realistic ratio rather than a run of one
// byte.
func benchText(n int) []byte {
	words := strings.Fields("the crawler fetches pages from hosts politely and stores raw responses " +
		"frontier scheduler lease credit shard queue parking robots delay concurrency campaign " +
		"section article paragraph link navigation footer header table list item anchor href div span")
	r := rand.New(rand.NewPCG(7, 11))
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><head><title>bench</title></head><body>\n")
	for b.Len() < n {
		if r.IntN(12) == 0 {
			fmt.Fprintf(&b, "<a href=\"/p/%d#section-%d\">%s</a>\n", r.IntN(100000), r.IntN(10), words[r.IntN(len(words))])
		}
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return []byte(b.String()[:n])
}

func dropTable(uri, table string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, uri)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
	return err
}

// runSinks runs the sink scenario: one child per sink.
func (o Options) runSinks(ctx context.Context) ([]Result, error) {
	var out []Result
	var errs []error
	for _, k := range o.Sinks {
		name := k
		switch k {
		case "kafka":
			name = "Kafka (in-memory kfake, acks=all)"
		case "warc":
			name = "WARC (temp dir, fsync per batch)"
		case "postgres":
			name = "PostgreSQL (COPY per batch)"
		}
		fmt.Fprintf(o.Log, "bench: sink %s, %d writers x %s of %d-byte pages ...\n", k, o.SinkWriters, o.SinkDuration, o.SinkPageBytes)
		res, err := o.child(ctx, Job{Kind: KindSink, Sink: k, Writers: o.SinkWriters, PageBytes: o.SinkPageBytes,
			Duration: o.SinkDuration, PostgresURI: o.PostgresURI, Timeout: o.SinkDuration + time.Minute})
		res.Name = name
		if err != nil {
			errs = append(errs, fmt.Errorf("sink %s: %w", k, err))
			if res.Err == "" {
				res.Err = err.Error()
			}
		}
		fmt.Fprintf(o.Log, "bench: sink %s: %d records, %.0f records/s, %.1f MB/s\n", k, res.Records, res.RecordsPerSec(), res.MBPerSec())
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}

// RecordsPerSec is a sink run's records over its wall time.
func (r Result) RecordsPerSec() float64 { return perSec(float64(r.Records), r.Wall) }

// MBPerSec is a sink run's body bytes (10^6) over its wall time.
func (r Result) MBPerSec() float64 { return perSec(float64(r.BodyBytes)/1e6, r.Wall) }
