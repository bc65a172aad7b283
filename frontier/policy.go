package frontier

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Item is what a Policy sees of a URL the scheduler holds.
type Item struct {
	URL   string
	Host  string
	Depth int
	// Embed: the URL is a page's asset (an image, a stylesheet, ...: see
	// urlrule.Link.Embeds), at the depth of the page.
	Embed bool
	// Score is the score given at seeding or by the linking page.
	Score float64
	// HostFetched counts the pages fetched from Host so far.
	HostFetched int64
}

// Policy decides the order in which the scheduler leases URLs: among the
// URLs of one host, and among hosts whose politeness allows a request now,
// the highest Priority goes first (ties: first come, first served).
//
// Priority is called when the scheduler takes a URL in, and again for a
// host's head URL when the host's fetched count changes; it must be cheap
// and must not block. Implement it for your business and give it to the
// scheduler in its ServerConfig.Policies (in the scheduler's main):
//
//	type newsFirst struct{}
//	func (newsFirst) Priority(it frontier.Item) float64 {
//		if strings.Contains(it.URL, "/news/") {
//			return 100 - float64(it.Depth)
//		}
//		return -float64(it.Depth)
//	}
//	cfg := frontier.DefaultServerConfig()
//	cfg.Policies = map[string]frontier.Policy{"news": newsFirst{}}
type Policy interface {
	Priority(it Item) float64
}

// BreadthFirst prefers shallow URLs: every page at depth d before depth d+1,
// and a host's assets of depth d (embeds) before its pages of depth d, so
// that a page's images and stylesheets follow it soon.
type BreadthFirst struct{}

// Priority implements Policy.
func (BreadthFirst) Priority(it Item) float64 {
	if it.Embed {
		return embedAhead - float64(it.Depth)
	}
	return -float64(it.Depth)
}

// embedAhead puts an embed ahead of the pages of its depth and behind
// those one level up. RabbitMQ's levels are whole numbers, so a shard
// delivers the two alike; the scheduler's per-host order tells them apart.
const embedAhead = 0.5

// ByScore prefers the highest score given at seeding or by the linking page.
type ByScore struct{}

// Priority implements Policy.
func (ByScore) Priority(it Item) float64 { return it.Score }

// Fair prefers the hosts fetched least so far, so that every host advances
// at the same pace whatever its backlog.
type Fair struct{}

// Priority implements Policy.
func (Fair) Priority(it Item) float64 { return -float64(it.HostFetched) }

// builtinPolicies are the policies every scheduler has, under the names
// `--priority` takes. It is never written to.
var builtinPolicies = map[string]Policy{
	"bfs":   BreadthFirst{},
	"score": ByScore{},
	"fair":  Fair{},
}

// ErrUnknownPolicy: a campaign names a priority policy the scheduler does
// not have. The scheduler refuses to seed it (and the starter's preflight
// to start it), rather than crawl in an order nobody asked for.
var ErrUnknownPolicy = errors.New("unknown priority policy")

// policy returns the policy a campaign names: one of c.Policies, or a
// built-in.
func (c ServerConfig) policy(name string) (Policy, error) {
	if p, ok := c.Policies[name]; ok && p != nil {
		return p, nil
	}
	if p, ok := builtinPolicies[name]; ok {
		return p, nil
	}
	var names []string
	for n := range builtinPolicies {
		names = append(names, n)
	}
	for n := range c.Policies {
		names = append(names, n)
	}
	slices.Sort(names)
	return nil, fmt.Errorf("priority %q: %w (this scheduler has %s; a policy of your own goes in the scheduler's ServerConfig.Policies)",
		name, ErrUnknownPolicy, strings.Join(names, ", "))
}
