package bench

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// runRaw GETs every URL once with Concurrency workers over keep-alive
// connections, at most PerHostConcurrency to a host, reading and dropping
// the bodies: the ceiling of a crawler on this machine, with no parsing,
// no frontier and no politeness delay.
func runRaw(ctx context.Context, j Job) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	tr := &http.Transport{
		MaxConnsPerHost:     j.PerHostConcurrency,
		MaxIdleConnsPerHost: j.PerHostConcurrency,
		IdleConnTimeout:     time.Minute,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		// A crawler records a redirect as a page; so does the ceiling.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	urls := make(chan string)
	var fetched atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	cpu0, _ := selfUsage()
	start := time.Now()
	for range j.Concurrency {
		wg.Go(func() {
			for u := range urls {
				if err := get(ctx, client, u); err != nil {
					errOnce.Do(func() { firstErr = err })
					continue
				}
				fetched.Add(1)
			}
		})
	}
feed:
	for _, u := range j.URLs {
		select {
		case urls <- u:
		case <-ctx.Done():
			break feed
		}
	}
	close(urls)
	wg.Wait()
	wall := time.Since(start)
	cpu1, _ := selfUsage()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return Result{Wall: wall, Fetched: fetched.Load(), CPU: cpu1 - cpu0, InFlight: j.Concurrency}, firstErr
}

func get(ctx context.Context, c *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}
