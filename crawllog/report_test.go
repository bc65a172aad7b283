package crawllog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummary(t *testing.T) {
	lines := []Line{
		{Outcome: OutcomeRobots, URL: "http://a/robots.txt", Status: 200, Size: 10, MIME: "text/plain"},
		{Outcome: OutcomePage, URL: "http://a/", Status: 200, Size: 100, MIME: "text/html; charset=utf-8"},
		{Outcome: OutcomePage, URL: "http://a/1", Via: "http://a/", Path: "L", Status: 200, Size: 50, MIME: "text/html"},
		{Outcome: OutcomePage, URL: "http://cdn/i.png", Via: "http://a/1", Path: "LE", Status: 200, Size: 7, MIME: "image/png"},
		{Outcome: OutcomeRetry, URL: "http://a/2", Via: "http://a/1", Path: "LL", Status: 503},
		{Outcome: OutcomeFailed, URL: "http://a/2", Via: "http://a/1", Path: "LL", Reason: "timeout"},
		{Outcome: OutcomePage, URL: "http://b/", Status: 304, Revisit: "server-not-modified", MIME: "text/html"},
		{Outcome: OutcomeUnstored, URL: "http://b/x", Via: "http://b/", Path: "L", Status: 200, Size: 3},
		{Outcome: OutcomeDeadLettered, URL: "http://b/x", Via: "http://b/", Reason: "sink"},
		{Outcome: OutcomeDropped, URL: "http://b/private/", Via: "http://b/", Path: "L", Reason: "robots"},
	}
	r := Summary(lines)
	require.Equal(t, Totals{Attempts: 8, Pages: 4, Revisits: 1, Failed: 1, Errors: 2, Robots: 1, DeadLettered: 1, Dropped: 1, Bytes: 170}, r.Total)
	require.Equal(t, []Row{
		{Key: "http://a/", Totals: Totals{Attempts: 5, Pages: 3, Failed: 1, Errors: 1, Bytes: 157}},
		{Key: "http://b/", Totals: Totals{Attempts: 2, Pages: 1, Revisits: 1, Errors: 1, DeadLettered: 1, Dropped: 1, Bytes: 3}},
		{Key: RobotsSeed, Totals: Totals{Attempts: 1, Robots: 1, Bytes: 10}},
	}, r.BySeed, "an asset on a CDN counts under the seed its page came from")
	require.Equal(t, []Row{
		{Key: "a", Totals: Totals{Attempts: 5, Pages: 2, Failed: 1, Errors: 1, Robots: 1, Bytes: 160}},
		{Key: "b", Totals: Totals{Attempts: 2, Pages: 1, Revisits: 1, Errors: 1, DeadLettered: 1, Dropped: 1, Bytes: 3}},
		{Key: "cdn", Totals: Totals{Attempts: 1, Pages: 1, Bytes: 7}},
	}, r.ByHost)
	require.Equal(t, []Row{
		{Key: "-", Totals: Totals{Attempts: 3, Failed: 1, Errors: 2, DeadLettered: 1, Dropped: 1, Bytes: 3}},
		{Key: "text/html", Totals: Totals{Attempts: 3, Pages: 3, Revisits: 1, Bytes: 150}},
		{Key: "image/png", Totals: Totals{Attempts: 1, Pages: 1, Bytes: 7}},
		{Key: "text/plain", Totals: Totals{Attempts: 1, Robots: 1, Bytes: 10}},
	}, r.ByMIME, "parameters dropped")
	require.Equal(t, []Row{
		{Key: "200", Totals: Totals{Attempts: 5, Pages: 3, Errors: 1, Robots: 1, Bytes: 170}},
		{Key: "0 timeout", Totals: Totals{Attempts: 1, Failed: 1}},
		{Key: "304", Totals: Totals{Attempts: 1, Pages: 1, Revisits: 1}},
		{Key: "503", Totals: Totals{Attempts: 1, Errors: 1}},
		{Key: "0 robots", Totals: Totals{Dropped: 1}},
		{Key: "0 sink", Totals: Totals{DeadLettered: 1}},
	}, r.ByStatus)
}

func TestSeedOfALoopEnds(t *testing.T) {
	via := map[string]string{"a": "b", "b": "a"}
	require.Contains(t, []string{"a", "b"}, seedOf("a", via))
}
