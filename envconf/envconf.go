// Package envconf loads the environment a drover process reads (Temporal's
// address and namespace, RabbitMQ, Kafka, the schedulers and their token),
// with its defaults, in one place. It is a leaf, apart from package node,
// so that the starter reads the environment without linking the scheduler
// and the workers that node starts.
package envconf

import (
	"runtime/debug"
	"strings"

	"github.com/drover-crawl/drover/session"
)

// Defaults of the environment: the dev stack's addresses (`make dev`).
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultNamespace       = "default"
	DefaultScheduler       = "127.0.0.1:7420"
	DefaultKafkaBrokers    = "127.0.0.1:9092"
	DefaultAMQPURL         = "amqp://guest:guest@127.0.0.1:5672/"
)

// Env is the environment a drover process reads, with the defaults
// applied: every main loads it once (Load) and hands the pieces to what
// it wires, so that a variable is read, and defaulted, in one place.
type Env struct {
	TemporalAddress   string // TEMPORAL_ADDRESS
	TemporalNamespace string // TEMPORAL_NAMESPACE
	// TemporalUIURL is TEMPORAL_UI_URL, as set (empty: the starter derives
	// it where it can); TemporalUI is its deprecated old name, TEMPORAL_UI.
	TemporalUIURL, TemporalUI string
	// AMQPURL is AMQP_URL: one node's URL, or the URLs of a cluster's
	// nodes separated by commas (AMQPAddrs).
	AMQPURL string
	// QueueType is DROVER_QUEUE_TYPE, the scheduler's default shard queue
	// type; empty: DefaultQueueType(AMQPURL).
	QueueType    string
	KafkaBrokers string   // KAFKA_BROKERS
	Schedulers   []string // DROVER_SCHEDULER, comma-separated
	// Token is DROVER_TOKEN, or session.DevToken when it is unset, which
	// DevToken then says (a process warns; a scheduler on a non-loopback
	// address refuses it).
	Token    string
	DevToken bool
}

// Load reads the environment through getenv (os.Getenv in a main; a
// map in tests), with the defaults applied (WithDefaults).
func Load(getenv func(string) string) Env {
	get := func(key string) string { return strings.TrimSpace(getenv(key)) }
	return Env{
		TemporalAddress:   get("TEMPORAL_ADDRESS"),
		TemporalNamespace: get("TEMPORAL_NAMESPACE"),
		TemporalUIURL:     getenv("TEMPORAL_UI_URL"),
		TemporalUI:        getenv("TEMPORAL_UI"),
		AMQPURL:           get("AMQP_URL"),
		QueueType:         get("DROVER_QUEUE_TYPE"),
		KafkaBrokers:      get("KAFKA_BROKERS"),
		Schedulers:        session.ParseAddrs(getenv("DROVER_SCHEDULER")),
		Token:             getenv("DROVER_TOKEN"),
	}.WithDefaults()
}

// WithDefaults is e with the default of every field left empty: the one
// place the defaults are applied, for Load and for an Env built by hand
// (the starter's, in tests). Schedulers are trimmed, empty ones dropped.
func (e Env) WithDefaults() Env {
	or := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	or(&e.TemporalAddress, DefaultTemporalAddress)
	or(&e.TemporalNamespace, DefaultNamespace)
	or(&e.AMQPURL, DefaultAMQPURL)
	or(&e.KafkaBrokers, DefaultKafkaBrokers)
	var addrs []string
	for _, a := range e.Schedulers {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		addrs = []string{DefaultScheduler}
	}
	e.Schedulers = addrs
	if e.Token == "" {
		e.Token, e.DevToken = session.DevToken, true
	}
	return e
}

// AMQPAddrs splits an AMQP_URL into its nodes' URLs: several are given
// separated by commas, each a whole URL with its credentials
// ("amqp://u:p@10.0.0.1:5672/,amqp://u:p@10.0.0.2:5672/"). A client dials
// them in turn, from the one after the last that failed.
func AMQPAddrs(url string) []string { return session.ParseAddrs(url) }

// DefaultQueueType is the shard queue type a scheduler gives a campaign
// that names none: quorum when AMQP_URL names several nodes (a cluster:
// the URLs must outlive a node), classic on one node, where a quorum
// queue has no replica and costs more per message.
func DefaultQueueType(amqpURL string) string {
	if len(AMQPAddrs(amqpURL)) > 1 {
		return "quorum"
	}
	return "classic"
}

// WorkerGCPercent is the worker's GOGC when its environment sets none.
// A worker's heap is mostly pages in flight, made and dropped by the
// thousand a second: at Go's default (100) the collector took about a
// quarter of the worker's CPU (dev stack, fleet 8, plain test web: worker
// and scheduler 0.40-0.61 CPU-s per 1,000 pages at 100, 0.29-0.38 at
// 400), for a heap of tens of MB. 400 lets the heap grow to five times
// what is live between collections (the worker's RSS went 75 -> 124 MB
// there). What is live is bounded by the pages in flight: sessions x
// fetcher concurrency x body cap (8 x 32 x 1 MiB, plus a decoded copy,
// about 512 MiB at worst). A worker keeps a memory limit of its own too
// (WorkerMemoryLimit), under which the collector runs more often as the
// heap nears it (400 still applies below it); GOGC and GOMEMLIMIT set in
// the environment win.
const WorkerGCPercent = 400

// SchedulerGCPercent is the scheduler's GOGC when its environment sets
// none. A scheduler's live heap is its held URLs and the records under way
// (about 25-30 MB at a million URLs over 10,000 hosts), and it allocates
// about 10 KB per page recorded: at 50 the heap stays within one and a
// half times what is live. The price is more collections: the
// scheduler's share of the stack's CPU on the million-page web was 27-29%
// at 100 and 30-31% at 50, in runs hours apart (bench/README.md, "The
// scheduler's memory: its arenas, its binary, its backlog"). A memory
// limit is no substitute: what is live is the work waiting on the
// scheduler, and a limit near it makes the collector run back to back
// while that work grows.
const SchedulerGCPercent = 50

// A worker's soft memory limit (Go's GOMEMLIMIT) follows what it runs:
// WorkerMemoryBase, plus WorkerMemoryPerSession for each FetchSession (its
// pages in flight), plus, for each campaign it has sessions of,
// WorkerMemoryPerCampaign (the campaign's idle connections and sinks'
// batches) and WorkerMemoryPerKnownLinks for each scheduler (the known
// links it keeps of that scheduler, about 14 MB when full). What a worker
// holds live on ordinary pages is about 20 MB plus 1 MB per session (25
// MB at 8 sessions and one campaign, 82 MB at 64, on the test web's 8 KiB
// pages), so the limit is seven to eight times that: the collector keeps
// to GOGC=400 below it and runs more often only as the heap nears it,
// which held a worker of 8 sessions under 256 MB of RSS where it peaked
// at 281 MB without (a million pages over 10,000 hosts). Pages of
// megabytes hold more live than the limit allows for: set GOMEMLIMIT (or
// GOMEMLIMIT=off) then.
const (
	WorkerMemoryBase          = 128 << 20
	WorkerMemoryPerSession    = 6 << 20
	WorkerMemoryPerCampaign   = 16 << 20
	WorkerMemoryPerKnownLinks = 16 << 20
)

// WorkerMemoryLimit is the soft memory limit of a worker running sessions
// FetchSessions of campaigns campaigns, with schedulers schedulers.
func WorkerMemoryLimit(sessions, campaigns, schedulers int) int64 {
	perCampaign := WorkerMemoryPerCampaign + int64(max(schedulers, 0))*WorkerMemoryPerKnownLinks
	return WorkerMemoryBase + int64(max(sessions, 0))*WorkerMemoryPerSession + int64(max(campaigns, 0))*perCampaign
}

// MemoryLimitSet reports whether the environment (getenv) sets GOMEMLIMIT,
// "off" included: a process then leaves its limit to it.
func MemoryLimitSet(getenv func(string) string) bool {
	return strings.TrimSpace(getenv("GOMEMLIMIT")) != ""
}

// DefaultGC sets the collector's GOGC to percent unless the environment
// (getenv) sets GOGC itself, and reports whether it did.
func DefaultGC(getenv func(string) string, percent int) bool {
	if strings.TrimSpace(getenv("GOGC")) != "" {
		return false
	}
	debug.SetGCPercent(percent)
	return true
}
