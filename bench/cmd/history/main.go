// Command history runs one campaign against the test web for a while and
// reports the length of its workflow history, to check that a long
// campaign's history stays small (issue 4: under 10,000 events at any
// time). It brings up its own dev stack on free ports.
//
//	cd bench && go run ./cmd/history -duration 30m
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/bench"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/workflows"
)

func main() {
	duration := flag.Duration("duration", 30*time.Minute, "how long the campaign runs (max-duration)")
	flag.Parse()
	if err := run(*duration); err != nil {
		fmt.Fprintln(os.Stderr, "history:", err)
		os.Exit(1)
	}
}

func run(d time.Duration) error {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	tbin, err := bench.TemporalBinary()
	if err != nil {
		return err
	}
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{BinaryPath: tbin, UIPort: -1})
	if err != nil {
		return err
	}
	defer tmp.Stop()
	k, err := devstack.StartKafka("127.0.0.1:0", devstack.KafkaPagesTopic)
	if err != nil {
		return err
	}
	defer k.Close()
	amqpURL := os.Getenv("AMQP_URL")
	if amqpURL == "" {
		amqpURL = "amqp://guest:guest@127.0.0.1:5672/"
	}
	sched, err := node.StartScheduler(ctx, node.SchedulerConfig{Server: frontier.DefaultServerConfig(), Listen: "127.0.0.1:0", AMQPURL: amqpURL, Log: log})
	if err != nil {
		return err
	}
	defer sched.Close()
	w, err := temporalnode.StartWorkers(tmp.Client(), temporalnode.WorkerConfig{Identity: "history", Activities: &activities.Activities{
		Schedulers: []string{sched.Addr()}, Token: session.DevToken, KafkaBrokers: k.Addr(), Identity: "history",
	}})
	if err != nil {
		return err
	}
	defer w.Stop()
	// Enough pages at the default 1 s per host to outlast d.
	pages := int(d/time.Second) + 100
	web, err := testweb.Start(testweb.Config{Hosts: 2, PagesPerHost: pages, PageBytes: 1024, Base: 60})
	if err != nil {
		return err
	}
	defer web.Close()
	cfg := campaign.Config{ID: fmt.Sprintf("history-%d", time.Now().Unix()), Seeds: web.Seeds(), Fetchers: 4,
		MaxDuration: d, AllowPrivate: true, Sinks: []string{"kafka://" + k.Addr() + "/" + devstack.KafkaPagesTopic}}
	c := tmp.Client()
	start := time.Now()
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue}, workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	var st workflows.Status
	go func() { done <- r.Get(ctx, &st) }()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	maxLen := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			n := historyLength(ctx, c, cfg.ID, "")
			fmt.Printf("campaign %s %s after %s: %d pages; history of the last run %d events (max seen while running %d), %d runs\n",
				cfg.ID, st.State, time.Since(start).Round(time.Second), st.PagesFetched, n, max(maxLen, n), st.Run+1)
			return nil
		case <-tick.C:
			n := historyLength(ctx, c, cfg.ID, "")
			maxLen = max(maxLen, n)
			fmt.Printf("%6s  history %5d events  pages %d\n", time.Since(start).Round(time.Second), n, web.Total())
		}
	}
}

func historyLength(ctx context.Context, c client.Client, id, runID string) int {
	it := c.GetWorkflowHistory(ctx, id, runID, false, 0)
	n := 0
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			break
		}
		n++
	}
	return n
}
