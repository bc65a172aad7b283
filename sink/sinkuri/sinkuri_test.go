package sinkuri_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/sink/sinkuri"
)

// uris are sink URIs of every kind, well formed or not, and of none.
var uris = []string{
	"kafka://k:9092/pages", "kafka:///pages", "kafka://k:9092/", "kafka://k:9092",
	"kafka://u:secret@k:9092/pages?sasl=plain", "kafka://k:9092/pages?password=secret",
	"warc:/var/crawl", "warc:relative/dir", "warc:",
	"postgres://u@db/crawl?sslmode=disable", "postgresql://db/crawl", "postgres://u:hunter2@db/crawl",
	"postgres://db/crawl?password=hunter2", "postgres://db/%zz",
	"s3://bucket", "", "KAFKA://k:9092/pages", "kafka:/pages",
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"kafka://k:9092/pages", ""},
		{"kafka:///pages", ""},
		{"warc:/var/crawl", ""},
		{"postgresql://db/crawl", ""},
		{"kafka://k:9092/", `sink "kafka://k:9092/": must be kafka://HOST:PORT/TOPIC (or kafka:///TOPIC for the worker's KAFKA_BROKERS)`},
		{"warc:", `sink "warc:": warc:DIR needs a directory`},
		{"postgres://u:hunter2@db/crawl", `sink "postgres://u:***@db/crawl": must not carry a password (Temporal's history and the Web UI show a campaign's config); set PGPASSWORD (or PGPASSFILE) in the workers' environment instead`},
		{"kafka://k:9092/pages?password=secret", `sink "kafka://k:9092/pages?password=***": must not carry a password parameter (Temporal's history and the Web UI show a campaign's config); set KAFKA_SASL_PASSWORD in the workers' environment instead`},
		{"s3://bucket", `sink "s3://bucket": unknown kind; use kafka://HOST:PORT/TOPIC, warc:DIR or postgres://HOST/DB`},
		{"postgres://db/%zz", `sink "(unparseable URI)": not a valid URI: parse "postgres://db/%zz": invalid URL escape "%zz"`},
	} {
		err := sinkuri.Check(tc.uri)
		if tc.want == "" {
			assert.NoError(t, err, tc.uri)
			continue
		}
		assert.EqualError(t, err, tc.want, tc.uri)
	}
}

// TestCampaignChecksByTheTable: a campaign's config accepts and refuses
// the sink URIs that package sink does, with the same message, and
// redacts URIs alike.
func TestCampaignChecksByTheTable(t *testing.T) {
	for _, uri := range uris {
		want, got := sinkuri.Check(uri), campaign.CheckSinkURI(uri)
		if want == nil {
			assert.NoError(t, got, uri)
		} else {
			assert.EqualError(t, got, want.Error(), uri)
		}
		assert.Equal(t, sinkuri.Redact(uri), campaign.Redact(uri), uri)
	}
}

func TestLookup(t *testing.T) {
	for uri, want := range map[string]*sinkuri.Kind{
		"kafka://k/t": sinkuri.Kafka, "warc:/d": sinkuri.WARC, "postgres://db/x": sinkuri.Postgres,
		"postgresql://db/x": sinkuri.Postgres, "s3://b": nil, "kafka:/t": nil,
	} {
		assert.Same(t, want, sinkuri.Lookup(uri), uri)
	}
	assert.Equal(t, "/d/e", sinkuri.WARC.Rest("warc:/d/e"))
}

// TestKindsAreDistinct: every kind has a name, a form and prefixes, and
// no prefix of one kind starts a URI of another.
func TestKindsAreDistinct(t *testing.T) {
	names := map[string]bool{}
	for _, k := range sinkuri.Kinds {
		require.NotEmpty(t, k.Name)
		require.NotEmpty(t, k.Form)
		require.NotEmpty(t, k.Prefixes, k.Name)
		require.False(t, names[k.Name], "kind %s twice in Kinds", k.Name)
		names[k.Name] = true
		for _, p := range k.Prefixes {
			assert.Same(t, k, sinkuri.Lookup(p), "prefix %q", p)
		}
	}
}

func TestParseWARC(t *testing.T) {
	for uri, want := range map[string]sinkuri.WARCSink{
		"warc:/d/e":                     {Dir: "/d/e"},
		"warc:/d/e?records=full":        {Dir: "/d/e"},
		"warc:/d/e?records=captures":    {Dir: "/d/e", Captures: true},
		"warc:rel/dir?records=captures": {Dir: "rel/dir", Captures: true},
	} {
		got, err := sinkuri.ParseWARC(uri)
		assert.NoError(t, err, uri)
		assert.Equal(t, want, got, uri)
		assert.NoError(t, sinkuri.Check(uri), uri)
	}
	for uri, says := range map[string]string{
		"warc:":                  "needs a directory",
		"warc:?records=captures": "needs a directory",
		"warc:/d?records=some":   "must be full",
		"warc:/d?max_body=10":    `unknown option "max_body"`,
		"warc:/d?records=%zz":    "its options",
	} {
		_, err := sinkuri.ParseWARC(uri)
		assert.ErrorContains(t, err, says, uri)
		assert.ErrorContains(t, sinkuri.Check(uri), says, uri)
	}
}
