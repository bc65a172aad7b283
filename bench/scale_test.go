package bench

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scaleSamples: three samples 10 s apart; the worker restarts between the
// second and the third (a new PID, its CPU counted from its start).
func scaleSamples(t0 time.Time) []Sample {
	procs := func(sched, worker time.Duration, workerPID int, rss int64) []ProcSample {
		return []ProcSample{
			{Name: "scheduler", PID: 10, CPU: sched, RSS: rss},
			{Name: "worker", PID: workerPID, CPU: worker, RSS: 2 * rss},
			{Name: "rabbitmq", PID: 0}, // not found: counts nothing
		}
	}
	return []Sample{
		{At: t0, Fetched: 0, Procs: procs(1*time.Second, 2*time.Second, 20, 50<<20)},
		{At: t0.Add(10 * time.Second), Fetched: 900, Procs: procs(3*time.Second, 5*time.Second, 20, 60<<20)},
		{At: t0.Add(20 * time.Second), Fetched: -1, Procs: procs(4*time.Second, 1*time.Second, 21, 70<<20)},
	}
}

func TestScaleRows(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	var firsts []time.Time
	for i := range 1000 { // 1,000 pages in the first 10 s, 500 in the next
		firsts = append(firsts, t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	for i := range 500 {
		firsts = append(firsts, t0.Add(10*time.Second+time.Duration(i+1)*20*time.Millisecond))
	}
	rows := scaleRows(scaleSamples(t0), firsts)
	require.Len(t, rows, 3)
	// The first page at t0 itself counts at the first sample.
	assert.Falsef(t, rows[0].Pages != 1 || rows[0].CPUPerK != -1 || rows[0].PagesPerSec != 0, "row 0 = %+v, want 1 page, no rate, no CPU", rows[0])
	// 999 more pages in 10 s; 5 s of CPU (2 scheduler + 3 worker).
	r := rows[1]
	assert.Falsef(t, r.Pages != 1000 || r.Elapsed != 10*time.Second || r.PagesPerSec != 99.9 || !near(r.CPUPerK, 5000.0/999),
		"row 1 = %+v, want 1000 pages at 10s, 99.9 pages/s, %.3f CPU s/1k", r, 5000.0/999)
	// 500 pages in 10 s; 1 s scheduler + 1 s of the restarted worker.
	r = rows[2]
	assert.Falsef(t, r.Pages != 1500 || r.PagesPerSec != 50 || r.CPUPerK != 4 || r.RSS["worker"] != 140<<20 || r.Fetched != -1,
		"row 2 = %+v, want 1500 pages, 50 pages/s, 4 CPU s/1k, worker RSS 140 MB", r)
	first, last := fifths(firsts)
	// A fifth is 300 pages: the first 300 over 3 s, the last 300 over 6 s.
	assert.Falsef(t, !near(first, 100) || !near(last, 50), "fifths = %.2f, %.2f; want 100, 50", first, last)
	if f, l := fifths(firsts[:9]); f != 0 || l != 0 {
		assert.Failf(t, "fifths of too few pages", "fifths of 9 pages = %v, %v; want 0, 0", f, l)
	}

	sc := ScaleResult{Result: Result{Pages: 1500, Samples: scaleSamples(t0), Wall: 20 * time.Second, State: "completed", Requests: 1515, Connections: 101},
		Hosts: 15, PagesPerHost: 100, Fleet: 8, Rows: rows, FirstFifth: first, LastFifth: last}
	assert.Equal(t, 7000.0/1500, sc.ScaleCPUPerK(), "ScaleCPUPerK")
	// By process: the scheduler 3 s, the worker 3 s and 1 s after its
	// restart, RabbitMQ not found.
	names, perK := sc.ProcCPUPerK()
	assert.Equal(t, []string{"scheduler", "worker", "rabbitmq"}, names, "ProcCPUPerK's processes")
	assert.Equal(t, []float64{3000.0 / 1500, 4000.0 / 1500, 0}, perK, "ProcCPUPerK")
	var b strings.Builder
	writeScaleRows(&b, rows)
	want := "| 0s | 1 | - | - | 50 | 100 | - | - | - |\n" +
		"| 10s | 1000 | 100 | 5.01 | 60 | 120 | - | - | - |\n" +
		"| 20s | 1500 | 50 | 4.00 | 70 | 140 | - | - | - |\n"
	assert.Equal(t, want, b.String(), "table rows")
	s := scaleSummary(sc)
	assert.Falsef(t, !strings.Contains(s, "last / first 0.50") || !strings.Contains(s, "overall **4.67**") || !strings.Contains(s, "worker **140**"),
		"summary %q: want last / first 0.50, 4.67 CPU s/1k, worker peak 140", s)
	assert.Contains(t, s, "by process: scheduler 2.000, worker 2.667, rabbitmq 0.000.", "summary")
	assert.Contains(t, s, "accepted 101 connections for 1515 requests (15.0 requests a connection)", "summary")

	path := filepath.Join(t.TempDir(), "plot", "scale.png")
	require.NoError(t, writeScalePlot(path, sc))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	assert.NoErrorf(t, err, "%s: not a PNG", path)
}

func TestCheckDisk(t *testing.T) {
	dir := t.TempDir()
	assert.NoError(t, checkDisk(dir, 1, 1), "checkDisk for 1 byte")
	err := checkDisk(dir, 1<<62, 1e6)
	assert.ErrorContains(t, err, "-scale-pages", "checkDisk for 4 EB: want a refusal that names -scale-pages")
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// The scale job's campaign: 10,000 hosts' seeds, too many for a config
// to carry as its scope, are valid with the scope regexes the job gives,
// both as the job builds it and once its seeds are streamed (the config
// then names the run and carries no seed).
func TestScaleCampaignValid(t *testing.T) {
	var seeds []string
	for i := range 10_000 {
		seeds = append(seeds, fmt.Sprintf("http://127.%d.%d.%d:8080/", scaleBase, (i+1)>>8, (i+1)&0xff))
	}
	j := Job{Seeds: seeds, Fleet: 8, PerHostConcurrency: 8, PerHostDelay: time.Millisecond, Timeout: time.Hour,
		Scope: []string{fmt.Sprintf(`^http://127\.%d\.`, scaleBase)}}
	cfg, _, err := jobCampaign(j, "bench-scale-test")
	require.NoError(t, err)
	cfg.Seeds, cfg.SeedsFile, cfg.Run = nil, "the 10000 seeds of the config", campaign.NewRun(time.Now(), 1)
	assert.NoError(t, cfg.WithDefaults().Validate(), "the streamed config")
}
