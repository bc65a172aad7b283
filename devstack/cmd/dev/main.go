// Command dev runs the dev stack in the foreground (`make dev`): the
// Temporal dev server with its Web UI, Kafka (log in data/kafka), a
// scheduler and a worker, each a process of its own that this one restarts
// when it dies, with RabbitMQ from AMQP_URL. Ctrl-C stops all of it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/envconf"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env := envconf.Load(os.Getenv)
	s, err := devstack.StartStack(ctx, devstack.StackOptions{AMQPURL: env.AMQPURL, Token: env.Token, Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "make dev:", err)
		os.Exit(1)
	}
	fmt.Println(s.Describe())
	fmt.Println("\nstart a campaign: go run ./starter start --id first --seed https://example.org/ --wait")
	fmt.Println("Ctrl-C stops the stack.")
	<-ctx.Done()
	fmt.Println("\nstopping...")
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
	}
}
