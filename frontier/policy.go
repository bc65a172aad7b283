package frontier

import (
	"fmt"

	"github.com/drover-crawl/drover/campaign"
)

// Item is what a Policy sees of a URL the scheduler holds.
type Item struct {
	URL   string
	Host  string
	Depth int
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
// and must not block. Implement it for your business and register it with
// RegisterPolicy:
//
//	type newsFirst struct{}
//	func (newsFirst) Priority(it frontier.Item) float64 {
//		if strings.Contains(it.URL, "/news/") {
//			return 100 - float64(it.Depth)
//		}
//		return -float64(it.Depth)
//	}
//	func init() { frontier.RegisterPolicy("news", newsFirst{}) }
type Policy interface {
	Priority(it Item) float64
}

// BreadthFirst prefers shallow URLs: every page at depth d before depth d+1.
type BreadthFirst struct{}

// Priority implements Policy.
func (BreadthFirst) Priority(it Item) float64 { return -float64(it.Depth) }

// ByScore prefers the highest score given at seeding or by the linking page.
type ByScore struct{}

// Priority implements Policy.
func (ByScore) Priority(it Item) float64 { return it.Score }

// Fair prefers the hosts fetched least so far, so that every host advances
// at the same pace whatever its backlog.
type Fair struct{}

// Priority implements Policy.
func (Fair) Priority(it Item) float64 { return -float64(it.HostFetched) }

var policies = map[string]Policy{
	"bfs":   BreadthFirst{},
	"score": ByScore{},
	"fair":  Fair{},
}

// RegisterPolicy makes a policy available to campaigns by name. Call it
// from an init function of the scheduler's main (the scheduler applies it).
func RegisterPolicy(name string, p Policy) {
	policies[name] = p
	campaign.Priorities = append(campaign.Priorities, name)
}

// PolicyByName returns the named policy.
func PolicyByName(name string) (Policy, error) {
	p, ok := policies[name]
	if !ok {
		return nil, fmt.Errorf("priority %q: unknown policy", name)
	}
	return p, nil
}
