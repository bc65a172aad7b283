// Command kafka runs the dev stack's Kafka broker (franz-go's kfake) as a
// process of its own, its log in -data (fsynced per produce) or in memory
// with -data "". SIGINT or SIGTERM stops it cleanly.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/drover-crawl/drover/devstack"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9092", "address to listen on")
	data := flag.String("data", "data/kafka", "log directory; empty keeps everything in memory")
	topics := flag.String("topics", devstack.KafkaPagesTopic, "comma-separated topics to create when missing")
	flag.Parse()
	var ts []string
	for t := range strings.SplitSeq(*topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			ts = append(ts, t)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	k, err := devstack.StartKafkaWith(devstack.KafkaOptions{Addr: *listen, DataDir: *data, Topics: ts})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka:", err)
		os.Exit(1)
	}
	fmt.Printf("kafka listening on %s (log in %q, topics %v)\n", k.Addr(), *data, ts)
	<-sig
	k.Close()
}
