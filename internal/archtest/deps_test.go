package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are the packages (import path prefixes) that only a worker needs:
// the sinks' drivers and the HTML parser of link extraction.
var heavy = map[string]string{
	"github.com/jackc/pgx/":           "PostgreSQL sink driver",
	"github.com/segmentio/kafka-go":   "Kafka sink driver",
	"github.com/PuerkitoBio/goquery":  "HTML parser (fetch's link extraction)",
	"github.com/andybalholm/cascadia": "HTML selectors (goquery's)",
}

// TestProcessesLinkOnlyWhatTheyNeed: a scheduler and the workflow never
// touch a page body or a sink, so they link neither a sink driver nor the
// HTML parser; the starter links the sinks' drivers for its preflight
// checks (sink.Check: does the Kafka topic exist, can the table be
// created) but not the HTML parser. The URL rules (urlrule) and the page
// record (page) are leaf packages so that this holds.
func TestProcessesLinkOnlyWhatTheyNeed(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH:", err)
	}
	const mod = "github.com/drover-crawl/drover/"
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
			out, err := exec.Command("go", "list", "-deps", mod+c.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", c.pkg, err, out)
			}
			linked := map[string]string{} // heavy prefix -> first package of it
			for _, dep := range strings.Fields(string(out)) {
				for prefix := range heavy {
					if strings.HasPrefix(dep, prefix) && linked[prefix] == "" {
						linked[prefix] = dep
					}
				}
			}
			for prefix, what := range heavy {
				if linked[prefix] != "" && !contains(c.allow, prefix) {
					t.Errorf("%s links %s (%s); `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./%s` shows which import brings it", c.pkg, linked[prefix], what, c.pkg)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
