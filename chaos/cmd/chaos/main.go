// Command chaos is `make chaos`: during a crawl of a 10,000-page test web it
// breaks each of drover's dependencies once, alone (see chaos.Faults), at a
// moment when the fault hits work in flight, and prints one markdown table:
// what each fault hit (pages left, leases in flight, fetcher sessions),
// pages missing on the web's side and in the sink (must be 0), duplicate
// fetches, and the time from the end of each fault until fetching resumed.
// It exits 1 when a row failed: pages missing, a row that broke, or a fault
// that found no work in flight to hit. Needs root (tmpfs, the private
// RabbitMQ node), bin/temporal, rabbitmq-server and PostgreSQL on
// 127.0.0.1:5432.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/drover-crawl/drover/chaos"
)

func main() {
	var opts chaos.Options
	only := flag.String("faults", "", "comma-separated faults to run (default all): "+names())
	flag.IntVar(&opts.Hosts, "hosts", 20, "hosts of the test web")
	flag.IntVar(&opts.PagesPerHost, "pages-per-host", 500, "pages per host")
	flag.DurationVar(&opts.Outage, "outage", 0, "length of the outages (default 30s)")
	flag.StringVar(&opts.WorkDir, "dir", "", "keep every row's state and logs here (default a temporary directory, removed)")
	flag.Parse()
	faults := chaos.Faults()
	if *only != "" {
		want := strings.Split(*only, ",")
		faults = slices.DeleteFunc(faults, func(f chaos.Fault) bool { return !slices.Contains(want, f.Name) })
		if len(faults) == 0 {
			fmt.Fprintf(os.Stderr, "chaos: no fault named %q; faults: %s\n", *only, names())
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := chaos.Run(ctx, opts, faults)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	chaos.PrintTable(os.Stdout, opts, results)
	for _, r := range results {
		if r.Failed() {
			os.Exit(1)
		}
	}
}

func names() string {
	var n []string
	for _, f := range chaos.Faults() {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}
