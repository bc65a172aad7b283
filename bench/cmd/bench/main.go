// Command bench runs drover's benchmark suite (issue 7): drover's whole
// pipeline at several fleet sizes, Colly v2 and plain GETs on the same test
// web, then drover and Colly on a politeness-bound web; then issue 3's slow
// host and queued backlog, issue 6's sink throughput and issue 15's
// scheduler cost as hosts grow to 100,000, and issue 29's recrawl: a second
// run --from the first, against it (-scenarios picks some; scale, a
// million pages through the dev stack sampled every 10 s, runs only when
// named). It prints markdown tables and writes them to -out. `make bench`
// runs it.
//
// With -child it runs one contender, a JSON job on stdin and a JSON result
// on stdout; the suite starts itself that way for every run.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/drover-crawl/drover/bench"
)

func main() {
	o := bench.DefaultOptions()
	child := flag.Bool("child", false, "run one job from stdin (internal)")
	fleets := flag.String("fleets", "1,4,16", "drover fleet sizes, comma-separated")
	out := flag.String("out", "results.md", "markdown file the tables are written to (empty: none); `make bench` runs in bench/")
	peers := flag.String("peers", strings.Join(o.Peers, ","), "peers on the plain web, comma-separated: colly, scrapy (empty: none)")
	peerPar := flag.String("peer-parallelism", joinInts(o.PeerParallelism), "each peer runs at each of these: Colly's global LimitRule Parallelism, Scrapy's CONCURRENT_REQUESTS")
	flag.IntVar(&o.QuorumFleet, "quorum-fleet", o.QuorumFleet, "fleet of the run of drover on quorum shard queues (0 skips it)")
	flag.IntVar(&o.DevFleet, "dev-fleet", o.DevFleet, "fleet of the run of drover as `make dev` runs it, every part a process (0 skips it)")
	flag.IntVar(&o.DevPerHost, "dev-per-host", o.DevPerHost, "per-host concurrency of that run")
	flag.DurationVar(&o.DevDelay, "dev-delay", o.DevDelay, "per-host delay of that run")
	flag.StringVar(&o.DevPerf, "dev-perf", "", "perf record every process of the dev-stack run (worker, scheduler, Kafka, Temporal, RabbitMQ) into this file (perf report -i FILE)")
	flag.StringVar(&o.DevPerfEvents, "dev-perf-events", "", "with -dev-perf, record these events instead of CPU samples, e.g. raw_syscalls:sys_enter,sched:sched_switch (perf report -i FILE --sort comm: per process)")
	flag.IntVar(&o.Hosts, "hosts", o.Hosts, "hosts of the plain web")
	flag.IntVar(&o.PagesPerHost, "pages", o.PagesPerHost, "pages per host of the plain web")
	flag.IntVar(&o.PerHostConcurrency, "per-host", o.PerHostConcurrency, "requests at once per host on the plain web")
	flag.IntVar(&o.Workers, "workers", 0, "also run drover with its fleet in this many worker processes (./worker) on the plain web (0 skips it)")
	flag.IntVar(&o.WorkersFleet, "workers-fleet", o.WorkersFleet, "fleet size of the -workers run")
	flag.DurationVar(&o.PerHostDelay, "delay", o.PerHostDelay, "delay between request starts per host on the plain web")
	flag.IntVar(&o.PoliteHosts, "polite-hosts", o.PoliteHosts, "hosts of the politeness-bound web (0 skips it)")
	flag.IntVar(&o.PolitePages, "polite-pages", o.PolitePages, "pages per host of the politeness-bound web")
	flag.DurationVar(&o.PoliteDelay, "polite-delay", o.PoliteDelay, "delay between request starts per host on the politeness-bound web")
	flag.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the drover run with -profile-fleet fetchers to this file")
	flag.IntVar(&o.ProfileFleet, "profile-fleet", o.ProfileFleet, "fleet size of the profiled drover run")
	flag.DurationVar(&o.Timeout, "timeout", o.Timeout, "bound of each crawl")
	scenarios := flag.String("scenarios", strings.Join(bench.AllScenarios, ","), "scenarios to run, comma-separated: "+strings.Join(bench.AllScenarios, ", ")+" (the default), and "+strings.Join(bench.OptInScenarios, ", ")+" when named")
	flag.IntVar(&o.ScaleHosts, "scale-hosts", o.ScaleHosts, "hosts of the scale scenario's web")
	flag.IntVar(&o.ScalePages, "scale-pages", o.ScalePages, "pages per host of the scale scenario's web")
	flag.IntVar(&o.ScaleFleet, "scale-fleet", o.ScaleFleet, "drover fleet of the scale scenario (per host: -dev-per-host, -dev-delay)")
	flag.DurationVar(&o.ScaleEvery, "scale-every", o.ScaleEvery, "how often the scale scenario samples pages, CPU and RSS")
	flag.DurationVar(&o.ScaleTimeout, "scale-timeout", o.ScaleTimeout, "bound of the scale scenario's crawl")
	flag.StringVar(&o.ScalePlot, "scale-plot", o.ScalePlot, "PNG the scale scenario's curve is drawn into (empty: none)")
	scaleSchedArgs := flag.String("scale-scheduler-flags", "", "more flags of the scale scenario's scheduler, space-separated (e.g. -seen-cache-bytes=16777216)")
	scaleSchedEnv := flag.String("scale-scheduler-env", "", "more environment of the scale scenario's scheduler, space-separated NAME=value (e.g. GOMEMLIMIT=100MiB)")
	scaleWorkerEnv := flag.String("scale-worker-env", "", "more environment of the scale scenario's worker, space-separated NAME=value (e.g. GOMEMLIMIT=200MiB)")
	flag.StringVar(&o.ScaleHeap, "scale-heap", "", "save the scale scenario's scheduler and worker heap profiles into this directory at every sample (go tool pprof -sample_index=inuse_space FILE)")
	flag.StringVar(&o.ScalePerf, "scale-perf", "", "perf record every process of the scale scenario's run into this file, as -dev-perf does for the dev-stack run (perf report -i FILE --sort comm,dso)")
	flag.IntVar(&o.SlowHosts, "slow-hosts", o.SlowHosts, "fast hosts of the slow-host scenario (the slow host holds as many URLs as all of them)")
	flag.IntVar(&o.SlowPages, "slow-pages", o.SlowPages, "pages per fast host of the slow-host scenario")
	flag.DurationVar(&o.SlowDelay, "slow-delay", o.SlowDelay, "per-host delay of the slow-host scenario's campaign")
	flag.DurationVar(&o.SlowCrawlDelay, "slow-crawl-delay", o.SlowCrawlDelay, "robots.txt Crawl-delay of the slow host")
	flag.IntVar(&o.SlowFleet, "slow-fleet", o.SlowFleet, "drover fleet size of the slow-host scenario")
	flag.IntVar(&o.QueuedURLs, "queued", o.QueuedURLs, "URLs published into the queued-backlog scenario's campaign")
	flag.IntVar(&o.QueuedHosts, "queued-hosts", o.QueuedHosts, "hosts those URLs spread over")
	flag.DurationVar(&o.QueuedHold, "queued-hold", o.QueuedHold, "how long the scheduler holds the backlog before its RSS is read")
	sinks := flag.String("sinks", strings.Join(o.Sinks, ","), "sinks of the sink scenario, comma-separated (kafka, warc, postgres)")
	flag.IntVar(&o.SinkWriters, "sink-writers", o.SinkWriters, "concurrent Store callers per sink")
	flag.IntVar(&o.SinkPageBytes, "sink-page-bytes", o.SinkPageBytes, "body bytes of each stored page")
	flag.DurationVar(&o.SinkDuration, "sink-duration", o.SinkDuration, "how long each sink is written to")
	flag.StringVar(&o.PostgresURI, "postgres", o.PostgresURI, "PostgreSQL of the sink scenario (a table of its own, dropped after)")
	hostsCounts := flag.String("hosts-counts", joinInts(o.HostsCounts), "virtual-host counts of the hosts scenario, comma-separated (issue 15)")
	flag.IntVar(&o.HostsPages, "hosts-pages", o.HostsPages, "pages per virtual host of the hosts scenario, all seeded")
	flag.IntVar(&o.HostsFleet, "hosts-fleet", o.HostsFleet, "fetcher sessions of the hosts scenario")
	flag.IntVar(&o.HostsCredit, "hosts-credit", o.HostsCredit, "leases each session of the hosts scenario holds at once")
	flag.BoolVar(&o.HostsFetch, "hosts-fetch", o.HostsFetch, "fetch each lease of the hosts scenario from the virtual web (false: answer at once)")
	flag.DurationVar(&o.HostsDelay, "hosts-delay", o.HostsDelay, "per-host delay of the hosts scenario's campaign")
	flag.StringVar(&o.HostsPprof, "hosts-pprof", "", "save the hosts scenario's scheduler profiles into this directory (heap-base-N, heap-held-N, heap-end-N, cpu-lease-N .pb.gz)")
	flag.IntVar(&o.RecrawlHosts, "recrawl-hosts", o.RecrawlHosts, "hosts of the recrawl scenario's web (0 skips it)")
	flag.IntVar(&o.RecrawlPages, "recrawl-pages", o.RecrawlPages, "pages per host of the recrawl web")
	flag.IntVar(&o.RecrawlDuplicates, "recrawl-dups", o.RecrawlDuplicates, "pages of the recrawl web also served at a second URL")
	flag.IntVar(&o.RecrawlPageBytes, "recrawl-page-bytes", o.RecrawlPageBytes, "approximate bytes of a recrawl web page (0: testweb's 8 KiB)")
	flag.IntVar(&o.RecrawlFleet, "recrawl-fleet", o.RecrawlFleet, "drover fleet size of both recrawl runs")
	flag.BoolVar(&o.RecrawlDedup, "recrawl-dedup", o.RecrawlDedup, "both recrawl runs deduplicate by payload (--dedup): a second URL is a revisit of its page's capture")
	flag.Float64Var(&o.RecrawlChange, "recrawl-change", o.RecrawlChange, "share of the recrawl web's pages changed between the two runs")
	recrawlSinks := flag.String("recrawl-sinks", strings.Join(o.RecrawlSinks, ","), "sinks of both recrawl runs, comma-separated (kafka, warc, warc-captures: warc:DIR?records=captures, postgres: -postgres)")
	flag.Parse()
	o.RecrawlSinks = parseList("-recrawl-sinks", *recrawlSinks, "kafka", "warc", "warc-captures", "postgres")
	o.Scenarios = parseList("-scenarios", *scenarios, append(slices.Clone(bench.AllScenarios), bench.OptInScenarios...)...)
	o.Sinks = parseList("-sinks", *sinks)
	o.ScaleSchedulerArgs, o.ScaleSchedulerEnv, o.ScaleWorkerEnv = strings.Fields(*scaleSchedArgs), strings.Fields(*scaleSchedEnv), strings.Fields(*scaleWorkerEnv)
	if u := os.Getenv("AMQP_URL"); u != "" {
		o.AMQPURL = u
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *child {
		if err := bench.RunChild(ctx, os.Stdin, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	for _, p := range []*string{&o.DevPerf, &o.CPUProfile, &o.HostsPprof, &o.ScalePlot, &o.ScalePerf, &o.ScaleHeap} {
		if *p != "" {
			abs, err := filepath.Abs(*p) // the dev-stack child works in the repository root
			if err != nil {
				log.Fatal(err)
			}
			*p = abs
		}
	}
	o.Fleets = parseInts("-fleets", *fleets)
	o.PeerParallelism = parseInts("-peer-parallelism", *peerPar)
	o.HostsCounts = parseInts("-hosts-counts", *hostsCounts)
	o.Peers = parseList("-peers", *peers, bench.KindColly, bench.KindScrapy)
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	o.Exe = exe
	rep, runErr := bench.Run(ctx, o)
	var b strings.Builder
	rep.Markdown(&b)
	fmt.Print(b.String())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if runErr != nil {
		log.Fatal(runErr)
	}
}

// parseList reads a comma-separated list ("" is none, spaces are trimmed);
// with allowed given, an item that is none of them is a usage error.
func parseList(flagName, s string, allowed ...string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if len(allowed) > 0 && !slices.Contains(allowed, f) {
			log.Fatalf("%s: %q is not one of %s", flagName, f, strings.Join(allowed, ", "))
		}
		out = append(out, f)
	}
	return out
}

// parseInts reads a comma-separated list of positive integers ("" is none).
func parseInts(flagName, s string) []int {
	var out []int
	for _, f := range parseList(flagName, s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			log.Fatalf("%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, n)
	}
	return out
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
