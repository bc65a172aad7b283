package frontier

import (
	"encoding/json"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	fastjson "github.com/segmentio/encoding/json"
)

// urlMsg is the body of a frontier message: one URL and what the scheduler
// needs to order and politely fetch it. It is small on purpose: the
// frontier's per-message cost is the crawler's wall.
type urlMsg struct {
	URL   string `json:"u"`
	Depth int    `json:"d,omitempty"`
	Hops  int    `json:"h,omitempty"`
	// Embeds: the embeds in a row that led here, 0 for a linked page
	// (urlrule.Link.Embeds).
	Embeds int     `json:"e,omitempty"`
	Parent string  `json:"p,omitempty"`
	Score  float64 `json:"s,omitempty"`
	// Path is the hop path from a seed (urlrule.Link.HopPath), for the
	// crawl log; empty for a seed.
	Path string `json:"t,omitempty"`
	// Revisit: the URL comes back from a continuous campaign's revisit
	// schedule, due at this time (Unix ns on the scheduler's clock); it is
	// fetched although marked done, unless its history says it was
	// fetched since (a second copy of the message).
	Revisit int64 `json:"r,omitempty"`
}

// Headers of a frontier message.
const (
	hdrAttempt   = "x-drover-attempt"    // attempts made so far (retries)
	hdrLost      = "x-drover-lost"       // leases lost (expired, session gone): a poison URL ends in the dead-letter queue
	hdrError     = "x-drover-error"      // the last error, for the dead-letter queue
	hdrReason    = "x-drover-reason"     // the failure's reason in one word, for the dead-letter queue
	hdrSinkFails = "x-drover-sink-fails" // times no sink stored the page
	// hdrBatch: the message carries this many URLs, as a batchMsg. A
	// message without it is one urlMsg (every message before batches).
	hdrBatch = "x-drover-batch"
)

// batchMsg is the body of a message of several URLs of one shard (header
// hdrBatch). New links are batched, and URLs parked with the same counts
// (flushParks); a URL retried or dead-lettered goes alone, with its
// headers.
type batchMsg struct {
	URLs []urlMsg `json:"b"`
}

func encodeMsg(m urlMsg, priority uint8, headers amqp.Table) amqp.Publishing {
	body, _ := json.Marshal(m) // a struct of strings and numbers always encodes
	return publishing(body, priority, headers)
}

// publishing is a JSON message of the frontier's queues.
func publishing(body []byte, priority uint8, headers amqp.Table) amqp.Publishing {
	return amqp.Publishing{
		ContentType: "application/json",
		Body:        body,
		Priority:    priority,
		Headers:     headers,
		Timestamp:   time.Now(),
	}
}

// encodeBatch encodes ms as one message: a plain urlMsg when it is one.
func encodeBatch(ms []urlMsg, priority uint8) amqp.Publishing {
	if len(ms) == 1 {
		return encodeMsg(ms[0], priority, nil)
	}
	body, _ := json.Marshal(batchMsg{URLs: ms})
	return publishing(body, priority, amqp.Table{hdrBatch: int32(len(ms))})
}

// encodeParked encodes parked URLs with their counts as one message at
// the lowest priority: a plain urlMsg when it is one.
func encodeParked(ms []urlMsg, hdr amqp.Table) amqp.Publishing {
	if len(ms) == 1 {
		return encodeMsg(ms[0], 0, hdr)
	}
	body, _ := json.Marshal(batchMsg{URLs: ms})
	hdr[hdrBatch] = int32(len(ms))
	return publishing(body, 0, hdr)
}

// decodeDelivery returns the URLs of a message: one, or a batch's. A batch
// with an unreadable URL keeps it (with its URL as given, maybe empty), to
// be dead-lettered alone. Messages are read with segmentio's decoder and
// written with encoding/json, as frames are (session.Decode says why).
func decodeDelivery(body []byte, hdr amqp.Table) ([]urlMsg, error) {
	if headerInt(hdr, hdrBatch) == 0 {
		m, err := decodeMsg(body)
		if err != nil {
			return nil, err
		}
		return []urlMsg{m}, nil
	}
	var b batchMsg
	if err := fastjson.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("frontier batch: %w", err)
	}
	if len(b.URLs) == 0 {
		return nil, fmt.Errorf("frontier batch: no url")
	}
	return b.URLs, nil
}

func decodeMsg(body []byte) (urlMsg, error) {
	var m urlMsg
	if err := fastjson.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("frontier message: %w", err)
	}
	if m.URL == "" {
		return m, fmt.Errorf("frontier message: no url")
	}
	return m, nil
}

func headerInt(h amqp.Table, name string) int {
	switch v := h[name].(type) {
	case int32:
		return int(v)
	case int64:
		return int(v)
	case int:
		return v
	case int16:
		return int(v)
	case int8:
		return int(v)
	case uint8:
		return int(v)
	}
	return 0
}

// priorityLevel maps a policy priority onto RabbitMQ's 0..MaxPriority, so a
// shard delivers its most urgent URLs first. Priorities are ranked around
// zero: breadth-first gives -depth, the level is MaxPriority-depth.
func priorityLevel(p float64) uint8 {
	l := float64(MaxPriority) + p
	if l < 0 {
		return 0
	}
	if l > MaxPriority {
		return MaxPriority
	}
	return uint8(l)
}
