// Command pages lists the raw pages of a Kafka topic that drover wrote:
// one line per record (URL, status, content type, size), or with -url the
// raw body of one page.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "Kafka brokers")
	topic := flag.String("topic", "drover.pages", "topic")
	one := flag.String("url", "", "print the raw body of this URL")
	flag.Parse()
	conn, err := kafka.Dial("tcp", *brokers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pages: kafka %s unreachable: %v (is the dev stack up? `make dev` or `make demo`)\n", *brokers, err)
		os.Exit(1)
	}
	parts, err := conn.ReadPartitions(*topic)
	conn.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pages: topic %s: %v\n", *topic, err)
		os.Exit(1)
	}
	n := 0
	for _, p := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{*brokers}, Topic: *topic, Partition: p.ID, MaxWait: 200 * time.Millisecond})
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			m, err := r.ReadMessage(ctx)
			cancel()
			if err != nil {
				break
			}
			h := map[string]string{}
			for _, x := range m.Headers {
				h[x.Key] = string(x.Value)
			}
			if *one != "" {
				if string(m.Key) == *one {
					os.Stdout.Write(m.Value)
					return
				}
				continue
			}
			n++
			fmt.Printf("%s\t%s\t%s\t%d bytes\n", m.Key, h["status"], h["content-type"], len(m.Value))
		}
		r.Close()
	}
	if *one != "" {
		fmt.Fprintf(os.Stderr, "pages: %s not found in %s\n", *one, *topic)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "%d records\n", n)
}
