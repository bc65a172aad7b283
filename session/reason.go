package session

import "github.com/drover-crawl/drover/page"

// Reasons of failures that the scheduler itself decides, which reach its
// clients in failure.Record.Reason and Stats.FailedBy. The words a fetcher
// reports in Outcome.Reason (dns, refused, timeout, tls, reset, 4xx, 5xx,
// ...) are package page's.
const (
	ReasonLost       = "lost"       // its lease was lost MaxLost times (a poison URL)
	ReasonUnreadable = "unreadable" // a frontier message that does not decode, or an unusable URL
	// ReasonVanished: a shard queue of the campaign vanished from RabbitMQ
	// while it ran (deleted by hand, or lost with its node), and the URLs
	// it held with it; the record's URL is the queue's name.
	ReasonVanished = "vanished"
	// ReasonExcluded: an operator's exclude, added while the campaign ran
	// (campaign.Rules), matched the URL before it was fetched.
	ReasonExcluded = "excluded"
)

// metricReasons are the failure reasons a metric label may take; any other
// (from a fetcher of another version, say) is counted as "other".
var metricReasons = map[string]bool{}

func init() {
	for _, r := range []string{
		page.ReasonDNS, page.ReasonRefused, page.ReasonUnreachable, page.ReasonTimeout,
		page.ReasonTLS, page.ReasonReset, page.ReasonProtocol, page.ReasonTooLarge,
		page.Reason4xx, page.Reason5xx, page.ReasonRobots, page.ReasonTrap, page.ReasonScope,
		page.ReasonRedirect, page.ReasonGuard, page.ReasonInvalid, page.ReasonSink,
		ReasonLost, ReasonUnreadable, ReasonVanished, ReasonExcluded, page.ReasonOther,
	} {
		metricReasons[r] = true
	}
}

// MetricReason is reason as a metric label: one of the known reasons, or
// "other", so that a label's values stay a small fixed set. The
// scheduler's metrics and the fetchers' count failures by it alike.
func MetricReason(reason string) string {
	if metricReasons[reason] {
		return reason
	}
	return page.ReasonOther
}
