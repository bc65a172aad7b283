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
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	// The first page at t0 itself counts at the first sample.
	if rows[0].Pages != 1 || rows[0].CPUPerK != -1 || rows[0].PagesPerSec != 0 {
		t.Errorf("row 0 = %+v, want 1 page, no rate, no CPU", rows[0])
	}
	// 999 more pages in 10 s; 5 s of CPU (2 scheduler + 3 worker).
	if r := rows[1]; r.Pages != 1000 || r.Elapsed != 10*time.Second || r.PagesPerSec != 99.9 || !near(r.CPUPerK, 5000.0/999) {
		t.Errorf("row 1 = %+v, want 1000 pages at 10s, 99.9 pages/s, %.3f CPU s/1k", r, 5000.0/999)
	}
	// 500 pages in 10 s; 1 s scheduler + 1 s of the restarted worker.
	if r := rows[2]; r.Pages != 1500 || r.PagesPerSec != 50 || r.CPUPerK != 4 || r.RSS["worker"] != 140<<20 || r.Fetched != -1 {
		t.Errorf("row 2 = %+v, want 1500 pages, 50 pages/s, 4 CPU s/1k, worker RSS 140 MB", r)
	}
	first, last := fifths(firsts)
	// A fifth is 300 pages: the first 300 over 3 s, the last 300 over 6 s.
	if !near(first, 100) || !near(last, 50) {
		t.Errorf("fifths = %.2f, %.2f; want 100, 50", first, last)
	}
	if f, l := fifths(firsts[:9]); f != 0 || l != 0 {
		t.Errorf("fifths of 9 pages = %v, %v; want 0, 0", f, l)
	}

	sc := ScaleResult{Result: Result{Pages: 1500, Samples: scaleSamples(t0), Wall: 20 * time.Second, State: "completed"},
		Hosts: 15, PagesPerHost: 100, Fleet: 8, Rows: rows, FirstFifth: first, LastFifth: last}
	if c := sc.ScaleCPUPerK(); c != 7000.0/1500 {
		t.Errorf("ScaleCPUPerK = %v, want %v", c, 7000.0/1500)
	}
	var b strings.Builder
	writeScaleRows(&b, rows)
	want := "| 0s | 1 | - | - | 50 | 100 | - | - | - |\n" +
		"| 10s | 1000 | 100 | 5.01 | 60 | 120 | - | - | - |\n" +
		"| 20s | 1500 | 50 | 4.00 | 70 | 140 | - | - | - |\n"
	if b.String() != want {
		t.Errorf("table rows:\n%s\nwant:\n%s", b.String(), want)
	}
	if s := scaleSummary(sc); !strings.Contains(s, "last / first 0.50") || !strings.Contains(s, "overall **4.67**") || !strings.Contains(s, "worker **140**") {
		t.Errorf("summary %q: want last / first 0.50, 4.67 CPU s/1k, worker peak 140", s)
	}

	path := filepath.Join(t.TempDir(), "plot", "scale.png")
	if err := writeScalePlot(path, sc); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("%s: not a PNG: %v", path, err)
	}
}

func TestCheckDisk(t *testing.T) {
	dir := t.TempDir()
	if err := checkDisk(dir, 1, 1); err != nil {
		t.Errorf("checkDisk for 1 byte: %v", err)
	}
	err := checkDisk(dir, 1<<62, 1e6)
	if err == nil || !strings.Contains(err.Error(), "-scale-pages") {
		t.Errorf("checkDisk for 4 EB: %v, want a refusal that names -scale-pages", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seeds, cfg.SeedsFile, cfg.Run = nil, "the 10000 seeds of the config", campaign.NewRun(time.Now(), 1)
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Errorf("the streamed config: %v", err)
	}
}
