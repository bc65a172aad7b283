// Command testweb serves the built-in synthetic test web on loopback
// addresses and prints its seed URLs, for trying the starter by hand:
//
//	go run ./devstack/cmd/testweb -hosts 5 -pages 400 &
//	go run ./starter start --id try --seed http://127.10.0.1:PORT/ --allow-private --per-host-delay 20ms --wait
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/drover-crawl/drover/testweb"
)

func main() {
	cfg := testweb.DefaultConfig()
	flag.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "hosts, each on its own 127.x.y.z address")
	flag.IntVar(&cfg.PagesPerHost, "pages", cfg.PagesPerHost, "pages per host")
	flag.IntVar(&cfg.Port, "port", 0, "port on every host (0: a free one)")
	flag.BoolVar(&cfg.Calendar, "calendar", false, "serve an endless calendar on the first host")
	flag.Parse()
	web, err := testweb.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testweb:", err)
		os.Exit(1)
	}
	defer web.Close()
	fmt.Printf("test web: %d hosts, %d pages\nseeds: %s\n", len(web.Hosts()), len(web.Pages()), strings.Join(web.Seeds(), " "))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Printf("%d requests served\n", web.Total())
}
