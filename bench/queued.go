package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
)

// QueuedResult is the queued-URLs scenario (issue 3): a scheduler's memory
// with a large backlog in its campaign's shard queues, and the seen-set's
// size per URL.
type QueuedResult struct {
	URLs, Hosts int
	Publish     time.Duration // publishing every URL, confirmed
	Hold        time.Duration // how long the scheduler ran with the backlog
	// The scheduler process (/proc/PID/status): VmRSS at the end and the
	// largest seen while sampling; VmHWM its peak.
	RSS, MaxRSS, HWM int64
	// What the scheduler reported (control Stats) at the end.
	Stats session.Stats
	// RabbitMQ's VmRSS before publishing and with the backlog queued (the
	// shared broker: anyone else's queues count too).
	RabbitRSS0, RabbitRSS1 int64
	// The seen-set: URLs marked queued in a fresh seen.Pebble, its files'
	// bytes and the time per mark.
	SeenBytes   int64
	SeenPerMark time.Duration
	Err         string
}

// runQueued publishes QueuedURLs URL messages (frontier's message body,
// {"u":"..."}, persistent, priority 9 as a depth-0 URL under bfs) over
// QueuedHosts hosts into a fresh campaign's shard queues, host after host,
// with publisher confirms; starts a scheduler binary (go build ./scheduler)
// as a child process; opens one fetcher session that never gives credit,
// so nothing is leased: the scheduler fills its prefetch window, holds each
// host's URLs up to holdWindow ahead and parks the rest. After QueuedHold it
// reads the scheduler's VmRSS and VmHWM. Then it deletes the campaign's
// queues, and marks the same URLs queued in a fresh seen.Pebble to report
// its bytes per URL.
func (o Options) runQueued(ctx context.Context) (res QueuedResult, err error) {
	res.URLs, res.Hosts, res.Hold = o.QueuedURLs, o.QueuedHosts, o.QueuedHold
	dir, bin, err := o.buildScheduler(ctx, "queued")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	id := fmt.Sprintf("bench-queued-%d", time.Now().UnixNano())
	ch, topo, closeCampaign, err := o.openCampaign(id)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := closeCampaign(); cerr != nil {
			err = errors.Join(err, cerr)
		} else {
			fmt.Fprintf(o.Log, "bench: queued: deleted the queues of %s\n", id)
		}
	}()
	rabbit := rabbitPID()
	res.RabbitRSS0, _ = procStatusBytes(rabbit, "VmRSS:")
	fmt.Fprintf(o.Log, "bench: queued: publishing %d URLs over %d hosts into %s ...\n", o.QueuedURLs, o.QueuedHosts, id)
	start := time.Now()
	if err := publishURLs(ctx, ch, topo, o.QueuedURLs, o.QueuedHosts, o.Log); err != nil {
		return res, err
	}
	res.Publish = time.Since(start)
	res.RabbitRSS1, _ = procStatusBytes(rabbit, "VmRSS:")
	fmt.Fprintf(o.Log, "bench: queued: published in %s (%.0f/s)\n", res.Publish.Round(time.Millisecond), float64(o.QueuedURLs)/res.Publish.Seconds())

	if err := o.holdScheduler(ctx, bin, dir, id, &res); err != nil {
		return res, err
	}

	// The seen-set, apart from the scheduler.
	store, err := seen.OpenPebble(filepath.Join(dir, "seen-measure"), seen.PebbleOptions{})
	if err != nil {
		return res, err
	}
	keys := make([]seen.Key, 0, 1000)
	start = time.Now()
	for i := range o.QueuedURLs {
		keys = append(keys, seen.KeyOf(queuedURL(i, o.QueuedURLs, o.QueuedHosts)))
		if len(keys) == cap(keys) || i == o.QueuedURLs-1 {
			if err := store.MarkQueued(id, keys); err != nil {
				store.Close()
				return res, err
			}
			keys = keys[:0]
		}
	}
	res.SeenPerMark = time.Since(start) / time.Duration(max(o.QueuedURLs, 1))
	if err := store.Close(); err != nil {
		return res, err
	}
	res.SeenBytes = store.DiskBytes()
	return res, nil
}

// openCampaign connects to RabbitMQ and declares campaign id's queues; ch
// is in confirm mode. closeCampaign deletes the queues (on a channel of its
// own: a failed publish closes ch) and closes the connection.
func (o Options) openCampaign(id string) (ch *amqp.Channel, topo frontier.Topology, closeCampaign func() error, err error) {
	topo = frontier.Topology{Campaign: id}
	conn, err := amqp.Dial(o.AMQPURL)
	if err != nil {
		return nil, topo, nil, fmt.Errorf("RabbitMQ at %s: %w", o.AMQPURL, err)
	}
	ch, err = conn.Channel()
	if err == nil {
		err = topo.Declare(ch)
	}
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, topo, nil, err
	}
	return ch, topo, func() error {
		defer conn.Close()
		if err := topo.Delete(conn); err != nil {
			return fmt.Errorf("delete campaign queues: %w", err)
		}
		return nil
	}, nil
}

// queuedURL is URL i of n over hosts hosts, host after host.
func queuedURL(i, n, hosts int) string {
	per := max(n/max(hosts, 1), 1)
	return fmt.Sprintf("http://host%d.example/p/%d", i/per, i%per)
}

// publishURLs publishes n URL messages (queuedURL) with confirms, in
// batches.
func publishURLs(ctx context.Context, ch *amqp.Channel, topo frontier.Topology, n, hosts int, log interface{ Write([]byte) (int, error) }) error {
	return publishEach(ctx, ch, topo, n, func(i int) string { return queuedURL(i, n, hosts) }, log)
}

// publishEach publishes urlOf(0..n-1) as depth-0 URL messages into their
// hosts' shards, with confirms, in batches.
func publishEach(ctx context.Context, ch *amqp.Channel, topo frontier.Topology, n int, urlOf func(int) string, log interface{ Write([]byte) (int, error) }) error {
	const batch = 2000
	confirms := make([]*amqp.DeferredConfirmation, 0, batch)
	type msg struct {
		U string `json:"u"`
	}
	next := time.Now().Add(10 * time.Second)
	for i := 0; i < n; {
		confirms = confirms[:0]
		for ; i < n && len(confirms) < batch; i++ {
			u := urlOf(i)
			body, _ := json.Marshal(msg{U: u})
			host := u[len("http://") : strings.Index(u[len("http://"):], "/")+len("http://")]
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", topo.Shard(frontier.ShardOf(host)), false, false, amqp.Publishing{
				ContentType: "application/json", DeliveryMode: amqp.Persistent, Priority: frontier.MaxPriority,
				Timestamp: time.Now(), Body: body,
			})
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			confirms = append(confirms, dc)
		}
		if err := frontier.AwaitConfirms(ctx, confirms); err != nil {
			return err
		}
		if time.Now().After(next) {
			fmt.Fprintf(log, "bench: %d/%d published\n", i, n)
			next = time.Now().Add(10 * time.Second)
		}
	}
	return nil
}

// holdScheduler runs the scheduler binary with one credit-less session for
// QueuedHold and samples its memory.
func (o Options) holdScheduler(ctx context.Context, bin, dir, id string, res *QueuedResult) error {
	sp, err := startSchedProc(bin, dir, o.AMQPURL)
	if err != nil {
		return err
	}
	defer sp.stop()
	cfg := campaign.Config{ID: id, Seeds: []string{"http://host0.example/"}, Sinks: []string{"warc:/unused"}}.WithDefaults()
	sess, err := sp.dialSession(ctx, cfg, "bench-queued", 32)
	if err != nil {
		return err
	}
	defer sess.Close()
	addr := sp.addr
	pid := sp.pid()
	fmt.Fprintf(o.Log, "bench: queued: scheduler pid %d holding for %s, no credit given ...\n", pid, o.QueuedHold)
	ctl, err := session.Client{Token: session.DevToken}.DialControl(ctx, addr)
	if err != nil {
		return err
	}
	defer ctl.Close()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	end := time.Now().Add(o.QueuedHold)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := sp.alive(); err != nil {
			return err
		}
		rss, _ := procStatusBytes(pid, "VmRSS:")
		res.MaxRSS = max(res.MaxRSS, rss)
	}
	res.RSS, _ = procStatusBytes(pid, "VmRSS:")
	res.HWM, _ = procStatusBytes(pid, "VmHWM:")
	res.MaxRSS = max(res.MaxRSS, res.RSS)
	if st, err := ctl.Stats(ctx, id); err == nil {
		res.Stats = st
	} else {
		fmt.Fprintf(o.Log, "bench: queued: stats: %v\n", err)
	}
	fmt.Fprintf(o.Log, "bench: queued: scheduler VmRSS %s MB (max %s), VmHWM %s MB; held %d, acked %d, published (parked) %d, queued %d\n",
		mb(res.RSS), mb(res.MaxRSS), mb(res.HWM), res.Stats.Held, res.Stats.Acked, res.Stats.Published, res.Stats.Queued)
	return nil
}

// procStatusBytes reads a kB field of /proc/PID/status ("VmRSS:").
func procStatusBytes(pid int, field string) (int64, error) {
	if pid == 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}
