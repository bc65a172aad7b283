// Batches: the new links of a record go to their shard queues several to
// a message. RabbitMQ's cost is per message, not per URL.

package frontier

import (
	"cmp"
	"slices"
)

// DefaultBatch is ServerConfig.Batch's default: up to this many URLs of
// one shard queue in one message.
const DefaultBatch = 32

// shardURL is a URL to publish to its shard queue at a priority level.
type shardURL struct {
	queue, host string
	m           urlMsg
	level       uint8
}

// batchMessages groups us into messages of at most size URLs each, one
// shard queue and one priority level to a message, a host's URLs side by
// side (links are mostly of their page's host, so a batch is mostly one
// host's, and parking a host parks whole batches). Size 1 gives one
// message per URL, as before batches.
func batchMessages(us []shardURL, size int) []outMsg {
	type group struct {
		queue string
		level uint8
	}
	order := []group{}
	by := map[group][]shardURL{}
	for _, u := range us {
		g := group{u.queue, u.level}
		if _, ok := by[g]; !ok {
			order = append(order, g)
		}
		by[g] = append(by[g], u)
	}
	out := make([]outMsg, 0, len(order))
	ms := make([]urlMsg, 0, size)
	for _, g := range order {
		urls := by[g]
		slices.SortStableFunc(urls, func(a, b shardURL) int { return cmp.Compare(a.host, b.host) })
		for len(urls) > 0 {
			n := min(len(urls), max(size, 1))
			ms = ms[:0]
			for _, u := range urls[:n] {
				ms = append(ms, u.m)
			}
			out = append(out, outMsg{key: g.queue, msg: encodeBatch(ms, g.level)})
			urls = urls[n:]
		}
	}
	return out
}
