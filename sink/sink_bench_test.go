package sink

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/page"
)

// benchStore stores 8 KB pages from 64 concurrent goroutines (a fetcher
// fleet's worth of Store callers) and reports records/s; -benchmem's MB/s
// counts body bytes.
func benchStore(b *testing.B, s Sink) {
	body := make([]byte, 8<<10)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	hdr := []byte("Content-Type: text/html\r\nContent-Length: 8192\r\n")
	var seq atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.SetBytes(int64(len(body)))
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			p := &page.Page{URL: fmt.Sprintf("http://bench.test/%d", n), Campaign: "bench", Status: 200,
				StatusLine: "HTTP/1.1 200 OK", Header: hdr, Body: body, ContentType: "text/html",
				FetchedAt: time.Now(), Depth: 1, Parent: "http://bench.test/", IP: "127.0.0.1",
				Request: []byte("GET / HTTP/1.1\r\nHost: bench.test\r\n\r\n")}
			if err := s.Store(ctx, p); err != nil {
				assert.NoError(b, err) // a RunParallel goroutine: assert, which only marks the failure
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	assert.NoError(b, s.Close())
}

func BenchmarkKafka(b *testing.B) {
	c := startKafka(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := NewKafka(ctx, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "bench", CreateTopic: true, BodyCap: testBodyCap})
	require.NoError(b, err)
	benchStore(b, k)
}

func BenchmarkWARC(b *testing.B) {
	w, err := NewWARC(WARCConfig{Dir: b.TempDir(), Campaign: "bench"})
	require.NoError(b, err)
	benchStore(b, w)
}

func BenchmarkPostgres(b *testing.B) {
	benchStore(b, newTestPostgres(b, testTable(b)))
}
