// Package frontier is drover's URL frontier and scheduler: the RabbitMQ
// topology of a campaign, the scheduler that leases its URLs to fetcher
// sessions by priority and politeness, dedup, and the server side of the
// session protocol (package session holds the protocol and its client).
//
// # Topology (per campaign, see Topology)
//
//   - Shards classic, durable, single-active-consumer queues; a URL's
//     shard is a hash of its host, so one scheduler owns a host's
//     politeness state without coordination. Schedulers subscribe to
//     their own share of the shards first, then to the others as standbys:
//     single-active-consumer gives failover, not sharing. Campaigns started
//     before batched shards have x-max-priority shards and keep them (a redeclare
//     with other arguments fails); new ones have none (cheaper per
//     message for RabbitMQ), priority living in the scheduler.
//   - Messages: a record's new links of one shard go up to
//     ServerConfig.Batch (32) to a message (header x-drover-batch, body
//     {"b":[...]}); a message without the header is one URL. A URL
//     re-published (parked, retried, dead-lettered) always goes alone, with
//     its headers.
//   - Parking queues (1 s, 10 s, 1 min, 10 min TTL), quorum queues that
//     dead-letter back into the shards at-least-once (RabbitMQ's own
//     dead-lettering is at-most-once from classic queues). A URL whose host
//     must wait longer than holdWindow, a retry, a backoff, a host whose
//     robots.txt is unreachable: each is re-published to a parking queue,
//     confirmed, then its delivery is acked. No delivery waits anywhere near
//     RabbitMQ's consumer_timeout, and no host fills its shard's prefetch.
//   - A dead-letter queue: a poison URL (its lease lost maxLost times, or
//     max-attempts retries, or an unreadable message) ends there with its
//     error in the x-drover-error header, instead of looping.
//
// # The invariant
//
// A delivery is acked only after each of its URLs is settled: (1) its
// outcome is stored by the fetcher in every sink and reported, every
// discovered link not already queued is published and confirmed, the links
// are marked queued and the URL is marked done; or (2) the URL itself was
// re-published, confirmed, to a parking or dead-letter queue. The URLs of
// a batch settle one by one; the message is acked after the last, or
// nacked back whole if one of them could not be settled (its settled URLs
// are then found done, not fetched again). Everything in the scheduler's
// memory is soft: a dead scheduler's unacked deliveries return to their
// queues whole, a dead session's leases return to the pool.
//
// # Dedup
//
// "Queued" and "done" marks live in a seen.Store (a seen.Pebble per
// scheduler; a damaged one is moved aside and answers "not seen"), written
// only after RabbitMQ confirmed the publish (queued) or after the
// outcome is recorded (done). A link marked queued or done is not
// published again; a delivery of a done URL, or of a URL this scheduler
// already holds, is acked without fetching. Racing publishers of one new
// link may both publish it: the second delivery is dropped as a duplicate.
// Seen marks are never written before the publish is confirmed: a URL
// marked seen but never queued would be lost for good.
//
// # Politeness
//
// Per host name: a delay between request starts and a concurrency cap
// (campaign defaults, per-host overrides, robots.txt Crawl-delay when
// larger), backoff on 429/503 honouring Retry-After. The host's next start
// is computed from the lease time and, on the outcome, from the time the
// fetcher finished (an upper bound of when its request started), so two
// starts are never closer than the delay with concurrency 1, whatever the
// transit time of a lease. robots.txt is fetched once per host through a
// robots lease, which counts as a request.
//
// # Priority
//
// A Policy orders a host's URLs and the ready hosts; its level (0..9) is
// also the RabbitMQ message priority, which only the priority shards of
// campaigns started before batched shards use (a batch takes its URLs' level:
// a record's links are grouped by level). A shard without priority
// delivers in publish order, and the scheduler orders what it holds
// (Prefetch URLs a shard, about). Built-ins: bfs, score, fair; a user's
// own goes in the scheduler's ServerConfig.Policies (its main). A campaign
// naming a policy the scheduler has not is refused (ErrUnknownPolicy): the
// starter's preflight asks (OpCheck), and seeding refuses it, which fails
// the campaign.
//
// # Drain
//
// Stats.Idle on every scheduler (nothing queued, held, leased or awaiting a
// confirm), twice at least a second apart with no ack and no publish in
// between, means the campaign's frontier is drained.
package frontier
