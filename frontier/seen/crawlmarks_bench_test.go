package seen

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkCrawlMarks replays a crawl's traffic to the seen store, as a
// scheduler sends it through its queued cache: per page, the delivery's
// Done, the record's Queued lookup of the page's links (most known: a
// host's navigation), MarkQueued of the new ones and MarkDone of the page.
// It reports the store's compaction bytes per page, the cost that grows
// with the store (bench/README.md, the million-page web).
func BenchmarkCrawlMarks(b *testing.B) {
	for _, pages := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprint(pages), func(b *testing.B) {
			for range b.N {
				crawlMarks(b, pages)
			}
		})
	}
}

func crawlMarks(b *testing.B, pages int) {
	b.StopTimer()
	p, err := OpenPebble(b.TempDir(), PebbleOptions{})
	require.NoError(b, err)
	defer p.Close()
	s := NewQueuedCache(p, DefaultQueuedCacheBytes)
	const camp, perHost, nav, links = "c", 100, 10, 20
	hosts := max(pages/perHost, 1)
	raw := func(i int) string { return fmt.Sprintf("http://h%d.test/p%d", i%hosts, i/hosts) }
	url := func(i int) Key { return KeyOf(raw(i)) }
	hist := make([]byte, 300) // a page's fetch history: validators, digest, links
	for i := range hist {
		hist[i] = byte(i * 31)
	}
	require.NoError(b, s.MarkQueued(camp, []Key{url(0)}))
	next := 1 // the next URL not discovered yet
	b.StartTimer()
	start := time.Now()
	cpu0 := cpuTime()
	const record = 64 // pages a record writes at once
	for r := 0; r < pages; r += record {
		var ks, pk []Key
		var hk [][]byte
		for i := r; i < min(r+record, pages); i++ {
			k := url(i)
			_, err := s.Done(camp, k)
			require.NoError(b, err)
			pk, hk = append(pk, k), append(hk, append([]byte{byte(i), byte(i >> 8)}, hist...))
			n := len(ks)
			for j := range nav { // the host's navigation: known soon
				ks = append(ks, url(i%hosts+hosts*((i/hosts+j)%perHost)))
			}
			for len(ks)-n < links { // new pages, then known ones elsewhere
				if next < pages && len(ks)-n < nav+2 {
					ks = append(ks, url(next))
					next++
					continue
				}
				ks = append(ks, url((i*7919+len(ks))%max(next, 1)))
			}
		}
		q, err := s.Queued(camp, ks)
		require.NoError(b, err)
		var fresh []Key
		var idx []HostURL
		for j, ok := range q {
			if !ok {
				fresh = append(fresh, ks[j])
				idx = append(idx, HostURL{Host: fmt.Sprintf("h%d.test", j%hosts), URL: fmt.Sprintf("http://h%d.test/p%d/%d", j%hosts, r, j)})
			}
		}
		require.NoError(b, s.IndexURLs(camp, idx))
		require.NoError(b, s.MarkQueued(camp, fresh))
		require.NoError(b, s.SetHistory("L", pk, hk))
		require.NoError(b, s.MarkDone(camp, pk))
	}
	b.StopTimer()
	m := p.db.Metrics()
	tot := m.Total()
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(pages), "ns/page")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(pages), "cpu-ns/page")
	b.ReportMetric(float64(tot.TableBytesCompacted)/float64(pages), "compactB/page")
	b.ReportMetric(float64(tot.TableBytesFlushed)/float64(pages), "flushB/page")
	b.ReportMetric(float64(m.Compact.Count), "compactions")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
