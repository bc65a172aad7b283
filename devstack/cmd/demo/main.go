// Command demo is `make demo`: it brings the dev stack up, serves the
// built-in test web, crawls it with a campaign of 4 fetchers while showing
// progress, prints a summary, and keeps the stack up until Ctrl-C.
// With -seed URL it crawls that site instead (with a page cap).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/workflows"
)

func main() {
	seed := flag.String("seed", "", "crawl this URL instead of the built-in test web")
	maxPages := flag.Int64("max-pages", 500, "page cap when -seed is given")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *seed, *maxPages); err != nil {
		fmt.Fprintln(os.Stderr, "make demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, seed string, maxPages int64) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	fmt.Println("starting the dev stack (Temporal dev server, Kafka, scheduler, worker)...")
	s, err := devstack.StartStack(ctx, devstack.StackOptions{AMQPURL: envconf.Load(os.Getenv).AMQPURL, Log: log})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\nstopping the dev stack...")
		s.Stop()
	}()
	fmt.Println(s.Describe())

	cfg := campaign.Config{ID: "demo-" + time.Now().Format("20060102-150405"), Fetchers: 4}
	if seed != "" {
		cfg.Seeds, cfg.MaxPages = []string{seed}, maxPages
	} else {
		web, err := testweb.Start(testweb.Config{Hosts: 5, PagesPerHost: 400, CrossHost: true, Calendar: true})
		if err != nil {
			return fmt.Errorf("test web: %w", err)
		}
		defer web.Close()
		fmt.Printf("\ntest web: %d hosts, %d pages, an endless calendar trap, robots.txt with a disallowed path: %v\n", len(web.Hosts()), len(web.Pages()), web.Seeds())
		// The test web is this machine: a 20 ms delay instead of the 1 s
		// default keeps the demo short. Real sites get the default.
		cfg.Seeds, cfg.PerHostDelay, cfg.AllowPrivate = web.Seeds(), new(20*time.Millisecond), true
	}
	cfg = cfg.WithDefaults()
	cfg.Run = campaign.NewRun(time.Now(), rand.Uint64()) // its key (ID~Run) is the progress line's
	cfg.Sinks = []string{"kafka://" + s.KafkaAddr() + "/" + devstack.KafkaPagesTopic}
	if err := cfg.Validate(); err != nil {
		return err
	}
	tc := s.Client()
	started := time.Now()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: cfg.ID, TaskQueue: workflows.TaskQueue,
		StaticSummary: fmt.Sprintf("demo crawl of %d seeds with %d fetchers", len(cfg.Seeds), cfg.Fetchers),
		StaticDetails: fmt.Sprintf("seeds: %v\n\nsinks: %v", cfg.Seeds, cfg.Sinks),
	}, workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	if err != nil {
		return fmt.Errorf("start campaign: %w", err)
	}
	ui := fmt.Sprintf("%s/namespaces/default/workflows/%s", s.UIURL(), cfg.ID)
	fmt.Printf("\ncampaign %s started; watch it in the Web UI: %s\n\n", cfg.ID, ui)

	done := make(chan error, 1)
	var st workflows.Status
	go func() { done <- run.Get(ctx, &st) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("campaign %s: %w", cfg.ID, err)
			}
			waiting = false
		case <-ctx.Done():
			return nil
		case <-tick.C:
			progress(ctx, s, cfg.FrontierKey(), started)
		}
	}
	took := time.Since(started)
	fmt.Printf("\n\ncampaign %s %s in %s\n", cfg.ID, st.State, took.Round(time.Millisecond))
	fmt.Printf("  pages fetched  %d (%.0f pages/s)\n  failures       %d\n", st.PagesFetched, float64(st.PagesFetched)/took.Seconds(), st.PagesFailed)
	fmt.Printf("  pages are in   Kafka topic %s on %s (raw: key = URL, value = body as sent, metadata in headers)\n", devstack.KafkaPagesTopic, s.KafkaAddr())
	fmt.Printf("  read them      go run ./devstack/cmd/pages -brokers %s -topic %s\n", s.KafkaAddr(), devstack.KafkaPagesTopic)
	fmt.Printf("  Web UI         %s\n", ui)
	fmt.Printf("  status         TEMPORAL_ADDRESS=%s go run ./starter status %s\n", s.TemporalAddr(), cfg.ID)
	fmt.Println("\nthe stack stays up for you to look around; Ctrl-C stops it (the pages stay in data/kafka).")
	<-ctx.Done()
	return nil
}

// progress prints the scheduler's counts of the campaign (its frontier
// key) on one line, over the last.
func progress(ctx context.Context, s *devstack.Stack, key string, started time.Time) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	fs, err := session.Client{Token: s.Opts.Token}.CampaignStats(qctx, []string{s.SchedulerAddr()}, key)
	if err != nil {
		return
	}
	el := time.Since(started)
	fmt.Printf("\r%6.1fs  pages %5d  failed %3d  queued %5d  in flight %3d  %6.0f pages/s ", el.Seconds(), fs.Fetched, fs.Failed, fs.Queued+max(fs.Held-fs.InFlight, 0), fs.InFlight, float64(fs.Fetched)/el.Seconds())
}
