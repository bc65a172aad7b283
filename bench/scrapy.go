package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// scrapySpider is the Scrapy peer: a minimal spider following in-scope links.
//
//go:embed scrapy_spider.py
var scrapySpider []byte

// ScrapyPython is the interpreter the Scrapy peer runs under: Debian's, so
// that a pyenv or virtualenv python3 on PATH does not shadow the packaged
// python3-scrapy.
const ScrapyPython = "/usr/bin/python3"

// ErrNoScrapy: python3-scrapy is not installed; the error says how to.
var ErrNoScrapy = errors.New("scrapy is not importable by " + ScrapyPython + ": install Debian's python3-scrapy (apt-get install -y python3-scrapy; `make bench` does it when run as root)")

// CheckScrapy returns Scrapy's version, or an error wrapping ErrNoScrapy.
func CheckScrapy(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ScrapyPython, "-c", "import scrapy; print(scrapy.__version__)").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: %v: %s", ErrNoScrapy, err, bytes.TrimSpace(out))
	}
	return string(bytes.TrimSpace(out)), nil
}

// scrapySettings are the Scrapy settings of a job: CONCURRENT_REQUESTS
// tuned like Colly's parallelism, per-domain concurrency matching it (the
// default 8 would cap it), robots.txt obeyed, no AutoThrottle, no delay, no
// HTTP cache, quiet logs.
func scrapySettings(j Job) map[string]any {
	return map[string]any{
		"CONCURRENT_REQUESTS":            j.Parallelism,
		"CONCURRENT_REQUESTS_PER_DOMAIN": j.Parallelism,
		"ROBOTSTXT_OBEY":                 true,
		"AUTOTHROTTLE_ENABLED":           false,
		"DOWNLOAD_DELAY":                 0,
		"HTTPCACHE_ENABLED":              false,
		"LOG_LEVEL":                      "WARNING",
		"TELNETCONSOLE_ENABLED":          false,
	}
}

// scrapyConfig is the row's config column: the settings as given.
func scrapyConfig(j Job, version string) string {
	s := scrapySettings(j)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, s[k]))
	}
	return fmt.Sprintf("scrapy %s (Debian python3-scrapy), %s; a minimal spider: every a[href], #fragment cut, followed when its host:port is the web's; Scrapy's dedup and robots.txt middleware",
		version, strings.Join(parts, " "))
}

// runScrapy runs the spider in a python3 process of its own; its CPU time
// and peak RSS are that process's (its rusage when it exits).
func runScrapy(ctx context.Context, j Job) (Result, error) {
	if j.Parallelism < 1 {
		return Result{}, fmt.Errorf("scrapy: parallelism %d", j.Parallelism)
	}
	version, err := CheckScrapy(ctx)
	if err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "drover-bench-scrapy-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "spider.py")
	if err := os.WriteFile(script, scrapySpider, 0o644); err != nil {
		return Result{}, err
	}
	arg, err := json.Marshal(map[string]any{"seeds": j.Seeds, "hostports": j.HostPorts, "settings": scrapySettings(j)})
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ScrapyPython, script, string(arg))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	res := Result{Wall: time.Since(start), InFlight: j.Parallelism, Config: scrapyConfig(j, version)}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSS = ru.Maxrss * 1024 // python's, not this child's
		}
	}
	if runErr != nil {
		return res, fmt.Errorf("scrapy: %w: %s", runErr, tail(stderr.String(), 800))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var stats map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &stats); err != nil {
		return res, fmt.Errorf("scrapy: no stats on stdout (%v): %s", err, tail(stderr.String(), 800))
	}
	if n, ok := stats["response_received_count"].(float64); ok {
		res.Fetched = int64(n)
	}
	// Scrapy logs a failed request at ERROR and counts it; a crawl of a
	// local web should have none.
	if n, ok := stats["log_count/ERROR"].(float64); ok && n > 0 {
		return res, fmt.Errorf("scrapy: %d errors logged: %s", int(n), tail(stderr.String(), 800))
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
