// Command load is `make load`: 64 fetchers over 3 worker processes and 2
// schedulers crawl a test web of 1,000 hosts, on a private RabbitMQ node,
// while every process's resident memory is sampled. It prints the crawl's
// counts (missing pages must be 0) and one row per process: RSS at 25%,
// 50% and 100% of the crawl, peak RSS and restarts. Needs root (the
// private RabbitMQ node) and bin/temporal.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-crawl/drover/chaos"
)

func main() {
	var opts chaos.LoadOptions
	flag.IntVar(&opts.Hosts, "hosts", 1000, "hosts of the test web")
	flag.IntVar(&opts.PagesPerHost, "pages-per-host", 20, "pages per host")
	flag.IntVar(&opts.Fetchers, "fetchers", 64, "fetchers of the campaign")
	flag.IntVar(&opts.Workers, "workers", 3, "worker processes")
	flag.IntVar(&opts.Schedulers, "schedulers", 2, "scheduler processes")
	flag.DurationVar(&opts.PerHostDelay, "per-host-delay", 0, "politeness delay per host (default 10ms)")
	flag.StringVar(&opts.WorkDir, "dir", "", "keep state and logs here (default a temporary directory, removed)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := chaos.RunLoad(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	chaos.PrintLoad(os.Stdout, res)
	if res.Missing > 0 || res.MissingSink > 0 {
		os.Exit(1)
	}
	for _, p := range res.Procs {
		if p.Restarts > 0 {
			os.Exit(1)
		}
	}
}
