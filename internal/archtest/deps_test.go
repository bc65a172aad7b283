package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heavy are the packages (import path prefixes) that only a worker needs:
// the sinks' drivers and the HTML parsers. TestHeavyListsFetchsParser
// keeps the list in step with what fetch parses pages with.
var heavy = map[string]string{
	"github.com/jackc/pgx/":           "PostgreSQL sink driver",
	"github.com/segmentio/kafka-go":   "Kafka sink driver",
	"golang.org/x/net/html":           "HTML tokenizer (fetch's link extraction; html/atom with it)",
	"github.com/tdewolff/parse/v2":    "CSS lexer (fetch's embeds: url() and @import)",
	"github.com/PuerkitoBio/goquery":  "HTML parser (fetch's tests hold link extraction to it)",
	"github.com/andybalholm/cascadia": "HTML selectors (goquery's)",
}

// TestHeavyListsFetchsParser: every package of another module that fetch
// links and the scheduler server (package frontier) does not is in heavy.
// Those are what fetch parses pages with; a parser missing from heavy
// would let TestProcessesLinkOnlyWhatTheyNeed pass with it linked into the
// scheduler. The standard library is left out (fetch's encoding/xml, for
// sitemaps, is linked by the starter too).
func TestHeavyListsFetchsParser(t *testing.T) {
	server := map[string]bool{}
	for _, dep := range deps(t, "frontier") {
		server[dep] = true
	}
	for _, dep := range deps(t, "fetch") {
		first, _, _ := strings.Cut(dep, "/")
		if server[dep] || strings.HasPrefix(dep, mod) || !strings.Contains(first, ".") {
			continue
		}
		listed := false
		for prefix := range heavy {
			listed = listed || strings.HasPrefix(dep, prefix)
		}
		assert.Truef(t, listed, "fetch links %s, which the scheduler does not, and heavy does not list it", dep)
	}
}

// TestProcessesLinkOnlyWhatTheyNeed: a scheduler and the workflow never
// touch a page body or a sink, so they link neither a sink driver nor the
// HTML parser; the starter links the sinks' drivers for its preflight
// checks (sink.Check: does the Kafka topic exist, can the table be
// created) but not the HTML parser. The URL rules (urlrule) and the page
// record (page) are leaf packages so that this holds.
func TestProcessesLinkOnlyWhatTheyNeed(t *testing.T) {
	cases := []struct {
		pkg   string
		allow []string // prefixes of heavy that this package may link
	}{
		{pkg: "scheduler"},
		{pkg: "workflows"},
		{pkg: "frontier"},
		{pkg: "frontier/seen"},
		{pkg: "urlrule"},
		{pkg: "page"},
		{pkg: "starter", allow: []string{"github.com/jackc/pgx/", "github.com/segmentio/kafka-go"}},
	}
	for _, c := range cases {
		t.Run(c.pkg, func(t *testing.T) {
			linked := map[string]string{} // heavy prefix -> first package of it
			for _, dep := range deps(t, c.pkg) {
				for prefix := range heavy {
					if strings.HasPrefix(dep, prefix) && linked[prefix] == "" {
						linked[prefix] = dep
					}
				}
			}
			for prefix, what := range heavy {
				assert.Falsef(t, linked[prefix] != "" && !contains(c.allow, prefix),
					"%s links %s (%s); `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./%s` shows which import brings it", c.pkg, linked[prefix], what, c.pkg)
			}
		})
	}
}

// scheduler are the packages that make up the scheduler (exact import
// paths, or prefixes ending in "/"): its server, its RabbitMQ client and
// its seen store's Pebble.
var scheduler = map[string]string{
	mod + "frontier":                 "the scheduler server",
	"github.com/rabbitmq/amqp091-go": "RabbitMQ client (the scheduler's)",
	"github.com/cockroachdb/pebble/": "Pebble (the scheduler's seen store)",
}

// TestClientsLinkOnlyTheSession: a fetcher (activities) and the operator's
// CLI (starter) talk to a scheduler over a session, through package
// session, so they link neither the scheduler server (package
// frontier) nor what only it needs. The session protocol and its client
// live apart from the server so that this holds.
func TestClientsLinkOnlyTheSession(t *testing.T) {
	for _, pkg := range []string{"activities", "starter", "starter/cli"} {
		t.Run(pkg, func(t *testing.T) {
			linked := map[string]string{} // scheduler path -> first package of it
			for _, dep := range deps(t, pkg) {
				for p := range scheduler {
					if (dep == p || strings.HasSuffix(p, "/") && strings.HasPrefix(dep, p)) && linked[p] == "" {
						linked[p] = dep
					}
				}
			}
			for p, what := range scheduler {
				assert.Emptyf(t, linked[p],
					"%s links %s (%s); `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./%s` shows which import brings it", pkg, linked[p], what, pkg)
			}
		})
	}
}

// TestSessionLinksNoFrontier: the session protocol is what a scheduler
// and its clients share; it sits beside the scheduler (package frontier
// and its seen store), not inside, and links none of it.
func TestSessionLinksNoFrontier(t *testing.T) {
	for _, pkg := range []string{"session", "session/sessiontest"} {
		for _, dep := range deps(t, pkg) {
			assert.Falsef(t, dep == mod+"frontier" || strings.HasPrefix(dep, mod+"frontier/"),
				"%s links %s; `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./%s` shows which import brings it", pkg, dep, pkg)
		}
	}
}

// TestSchedulerLinksNoTemporal: a scheduler has no Temporal client, and
// the SDK with its gRPC and its protobuf descriptors made its binary half
// again as large and its RSS at rest 35 MB against 22 (a scheduler's RSS
// counts the pages of its binary it touched). Temporal's side of a process
// is wired in node/temporalnode, not node; tlsconf builds Temporal's TLS
// config without the SDK's types.
func TestSchedulerLinksNoTemporal(t *testing.T) {
	for _, dep := range deps(t, "scheduler") {
		assert.Falsef(t, strings.HasPrefix(dep, "go.temporal.io/") || strings.HasPrefix(dep, "google.golang.org/grpc"),
			"the scheduler links %s; `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./scheduler` shows which import brings it", dep)
	}
}

// TestFailureIsALeaf: a failure record is shared by the seen store, the
// session protocol and the starter, so it links no other package of the
// project.
func TestFailureIsALeaf(t *testing.T) {
	for _, dep := range deps(t, "failure") {
		assert.Falsef(t, strings.HasPrefix(dep, mod) && dep != mod+"failure", "failure links %s", dep)
	}
}

const mod = "github.com/drover-crawl/drover/"

// deps is `go list -deps` of the module's package pkg: every package its
// binary links, tests aside.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH:", err)
	}
	out, err := exec.Command("go", "list", "-deps", mod+pkg).CombinedOutput()
	require.NoErrorf(t, err, "go list -deps %s:\n%s", pkg, out)
	return strings.Fields(string(out))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestWorkflowImportsNoWireType: what the Campaign workflow keeps in its
// history is its own types (workflows.Counts, copied from the session
// protocol's Stats by the activities), so that a change to the session
// protocol never changes what a recorded history decodes to. The workflow
// links no package of the session protocol, nor the scheduler.
func TestWorkflowImportsNoWireType(t *testing.T) {
	for _, dep := range deps(t, "workflows") {
		assert.Falsef(t, strings.HasPrefix(dep, mod+"frontier"),
			"workflows links %s; `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./workflows` shows which import brings it", dep)
	}
}
