// Package bench measures drover against its peers and against the
// machine's ceiling on the same synthetic web (testweb): drover's whole
// pipeline (RabbitMQ frontier, scheduler, Temporal fleet, Kafka sink with
// acks=all), Colly v2, and plain keep-alive GETs of the page URLs.
//
// Every contender runs in a child process of its own (the bench binary
// re-executed with -child), so that its CPU time and peak RSS are its own;
// the test web lives in the parent, whose request log is the referee: unique
// pages, duplicate fetches, missing pages, the crawl's span and, for the
// politeness scenario, the gaps between request starts to one host.
//
// Issue 3 and 6 scenarios follow: a slow host (robots.txt Crawl-delay 1 s,
// half the URLs) and its effect on the other hosts' completion time; a
// scheduler's memory with a large backlog in its shard queues, and the
// seen-set's bytes per URL; each sink's records/s with many concurrent
// Store callers. Issue 15's hosts scenario holds up to 100,000 virtual
// hosts (testweb.StartVirtual, reached through fetch.WithLookup) in a
// scheduler binary: its memory per active host and its CPU per lease as
// the hosts grow. Issue 29's recrawl scenario crawls a web of pages with
// validators twice on one stack, the second run From the first after a
// tenth of the pages changed: its pages/s, the 304s and each sink's bytes
// against the first run's.
//
// The suite is the bench/cmd/bench main, which `make bench` runs; it is not
// a test. bench/ is a module of its own (so that Colly stays out of the
// crawler's module graph); `make test` runs its few unit tests apart.
package bench
