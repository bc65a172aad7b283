package campaign

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	ok := Config{ID: "news-1", Seeds: []string{"https://example.org/"}}
	cases := []struct {
		name string
		edit func(*Config)
		want string // "" = valid; else a substring of the error
	}{
		{"defaults", func(c *Config) {}, ""},
		{"bad id", func(c *Config) { c.ID = "has space" }, `id "has space"`},
		{"no seed", func(c *Config) { c.Seeds = nil }, "seeds: at least one"},
		{"seed score", func(c *Config) { c.SeedScores = map[string]float64{"https://example.org/": 2.5} }, ""},
		{"score of no seed", func(c *Config) { c.SeedScores = map[string]float64{"https://example.org/x": 1} }, `seed_scores "https://example.org/x": not one of the seeds`},
		{"score not a number", func(c *Config) { c.SeedScores = map[string]float64{"https://example.org/": math.Inf(1)} }, `seed_scores "https://example.org/": +Inf: must be a finite number`},
		{"unparseable seed", func(c *Config) { c.Seeds = []string{"ht!tp://x"} }, `seed "ht!tp://x": not a valid URL`},
		{"ftp seed", func(c *Config) { c.Seeds = []string{"ftp://x/"} }, "must be an http or https URL"},
		{"bad scope", func(c *Config) { c.Scope = []string{"("} }, `scope "(": not a valid regular expression`},
		{"too many fetchers", func(c *Config) { c.Fetchers = 5000 }, "fetchers 5000: must be between 1 and 1024"},
		{"negative delay", func(c *Config) { c.PerHostDelay = new(-time.Second) }, "per_host_delay -1s"},
		{"no delay", func(c *Config) { c.PerHostDelay = new(time.Duration(0)) }, ""},
		{"host rule without host", func(c *Config) { c.Hosts = []HostRule{{Delay: new(time.Second)}} }, "hosts: every entry needs a host name"},
		{"host rule concurrency 0", func(c *Config) { c.Hosts = []HostRule{{Host: "a", Concurrency: new(0)}} }, `hosts "a": concurrency 0: must be between 1 and 256`},
		{"host rule negative delay", func(c *Config) { c.Hosts = []HostRule{{Host: "a", Delay: new(-time.Second)}} }, `hosts "a": delay -1s: must be between 0 (no delay) and 1h`},
		// Which policies exist is the scheduler's to say (frontier's
		// TestUnknownPolicy); the config checks the name's form only.
		{"policy of a scheduler's own", func(c *Config) { c.Priority = "news-first" }, ""},
		{"malformed priority", func(c *Config) { c.Priority = "Random Walk" }, `priority "Random Walk": must be a policy name`},
		{"priority too long", func(c *Config) { c.Priority = strings.Repeat("p", 33) }, `must be a policy name: 1-32`},
		{"kafka sink", func(c *Config) { c.Sinks = []string{"kafka://k:9092/pages"} }, ""},
		{"default brokers", func(c *Config) { c.Sinks = []string{"kafka:///pages"} }, ""},
		{"kafka without topic", func(c *Config) { c.Sinks = []string{"kafka://k:9092/"} }, "must be kafka://HOST:PORT/TOPIC"},
		{"warc", func(c *Config) { c.Sinks = []string{"warc:/var/crawl"} }, ""},
		{"secret in sink", func(c *Config) { c.Sinks = []string{"postgres://u:hunter2@db/crawl"} }, "must not carry a password"},
		{"secret parameter", func(c *Config) { c.Sinks = []string{"postgres://db/crawl?password=hunter2"} }, "must not carry a password"},
		{"unknown sink", func(c *Config) { c.Sinks = []string{"s3://bucket"} }, "unknown kind"},
		{"notify not http", func(c *Config) { c.NotifyURL = "mailto:ops@example.org" }, "notify_url"},
		{"tiny body cap", func(c *Config) { c.BodyCap = 10 }, "body_cap 10"},
		{"embeds in scope only", func(c *Config) { c.EmbedHops = new(0) }, ""},
		{"adaptive delay", func(c *Config) { c.DelayFactor = 2.5 }, ""},
		{"negative delay factor", func(c *Config) { c.DelayFactor = -1 }, "delay_factor -1: must be between 0 (off) and 100"},
		{"domain key", func(c *Config) { c.PolitenessKey = KeyDomain }, ""},
		{"group key", func(c *Config) {
			c.PolitenessKey, c.PolitenessGroups = KeyGroup, map[string]string{"example.org": "ex", "cdn.example.net": "ex"}
		}, ""},
		{"ip key", func(c *Config) { c.PolitenessKey = KeyIP }, ""},
		{"unknown key", func(c *Config) { c.PolitenessKey = "asn" }, `politeness_key "asn": must be host, domain, group or ip`},
		{"groups with the ip key", func(c *Config) {
			c.PolitenessKey, c.PolitenessGroups = KeyIP, map[string]string{"a.org": "g"}
		}, `politeness_groups: used only with politeness_key "group"`},
		{"group key without groups", func(c *Config) { c.PolitenessKey = KeyGroup }, "politeness_groups must map at least one"},
		{"groups without the group key", func(c *Config) { c.PolitenessGroups = map[string]string{"a.org": "g"} }, `politeness_groups: used only with politeness_key "group"`},
		{"group of a URL", func(c *Config) {
			c.PolitenessKey, c.PolitenessGroups = KeyGroup, map[string]string{"http://a.org/": "g"}
		}, `politeness_groups "http://a.org/": must be a host name`},
		{"malformed group", func(c *Config) {
			c.PolitenessKey, c.PolitenessGroups = KeyGroup, map[string]string{"a.org": "my group"}
		}, `group "my group" must be 1-64 characters`},
		{"negative embed hops", func(c *Config) { c.EmbedHops = new(-1) }, "embed_hops -1: must be between 0"},
		{"embed hops past the bound", func(c *Config) { c.EmbedHops = new(MaxEmbedHops + 1) }, "embed_hops 6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.WithDefaults().Validate()
			switch {
			case tc.want == "" && err != nil:
				require.NoError(t, err, "want valid")
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				require.FailNow(t, fmt.Sprintf("want an error containing %q, got %v", tc.want, err))
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				assert.Fail(t, fmt.Sprintf("the error repeats the secret: %v", err))
			}
		})
	}
}

func TestEmbedLimit(t *testing.T) {
	equal := func(got, want int, what string) {
		t.Helper()
		assert.Equalf(t, want, got, "%s: EmbedLimit", what)
	}
	equal(Config{}.EmbedLimit(), 2, "unset")
	equal(Config{EmbedHops: new(0)}.EmbedLimit(), 0, "0, a value")
	equal(Config{EmbedHops: new(4)}.WithDefaults().EmbedLimit(), 4, "set, then defaulted")
	equal(Config{NoEmbeds: true, EmbedHops: new(3)}.EmbedLimit(), -1, "no embeds")
}

func TestPolitenessFor(t *testing.T) {
	c := Config{PerHostDelay: new(time.Second), PerHostConcurrency: 1, Hosts: []HostRule{
		{Host: "Big.example", Delay: new(100 * time.Millisecond), Concurrency: new(4)},
		{Host: "own.example", Delay: new(time.Duration(0))},
		{Host: "wide.example", Concurrency: new(8)},
	}}
	for host, want := range map[string]struct {
		d time.Duration
		n int
	}{
		"big.example":   {100 * time.Millisecond, 4},
		"own.example":   {0, 1}, // delay 0 is a value: no delay for this host
		"wide.example":  {time.Second, 8},
		"other.example": {time.Second, 1},
	} {
		if d, n := c.PolitenessFor(host); d != want.d || n != want.n {
			assert.Fail(t, fmt.Sprintf("%s: %s, %d; want %s, %d", host, d, n, want.d, want.n))
		}
	}
	if d, n := (Config{}).PolitenessFor("x"); d != DefaultPerHostDelay || n != DefaultPerHostConcurrency {
		assert.Fail(t, fmt.Sprintf("unset: %s, %d; want the defaults", d, n))
	}
	d, _ := (Config{PerHostDelay: new(time.Duration(0))}).WithDefaults().PolitenessFor("x")
	assert.Zero(t, d, "per_host_delay 0 after WithDefaults, want 0 (no delay)")
}

// TestJSONInputs: the config is the workflow's JSON input. An input written
// before the pointer fields (plain numbers, as the old starter sent them
// after WithDefaults) decodes to the same values; in a new input an absent
// key is unset and 0 is a value.
func TestJSONInputs(t *testing.T) {
	old := `{"id":"c1","seeds":["https://a.example/"],"fetchers":4,"fetcher_concurrency":32,
		"max_depth":3,"per_host_concurrency":1,"per_host_delay":1000000000,"priority":"bfs",
		"user_agent":"ua","sinks":["kafka:///drover.pages"],"body_cap":1048576,"max_redirects":10,
		"max_attempts":3,"restart_alert":5,"hosts":[{"host":"h","delay":250000000,"concurrency":2}]}`
	var c Config
	require.NoError(t, json.Unmarshal([]byte(old), &c), "old input")
	require.NoError(t, c.WithDefaults().Validate(), "old input")
	if n, ok := c.DepthLimit(); !ok || n != 3 {
		assert.Fail(t, fmt.Sprintf("max_depth: %d, %v", n, ok))
	}
	if c.HostDelay() != time.Second || c.RedirectLimit() != 10 {
		assert.Fail(t, fmt.Sprintf("per_host_delay %s, max_redirects %d", c.HostDelay(), c.RedirectLimit()))
	}
	if d, n := c.PolitenessFor("h"); d != 250*time.Millisecond || n != 2 {
		assert.Fail(t, fmt.Sprintf("host rule: %s, %d", d, n))
	}
	// Encoding and decoding again gives the same config.
	b, err := json.Marshal(c)
	require.NoError(t, err)
	var again Config
	if assert.NoError(t, json.Unmarshal(b, &again), "round trip") {
		assert.Equal(t, c, again, "round trip")
	}

	var zero, unset Config
	require.NoError(t, json.Unmarshal([]byte(`{"max_depth":0,"per_host_delay":0,"max_redirects":0,"host_retries":0,"retry_backoff":0}`), &zero))
	zero = zero.WithDefaults()
	unset = unset.WithDefaults()
	if n, ok := zero.DepthLimit(); !ok || n != 0 {
		assert.Fail(t, fmt.Sprintf("max_depth 0: %d, %v; want 0 (the seeds only)", n, ok))
	}
	_, ok := unset.DepthLimit()
	assert.False(t, ok, "max_depth unset: a limit; want none")
	if zero.HostDelay() != 0 || unset.HostDelay() != DefaultPerHostDelay {
		assert.Fail(t, fmt.Sprintf("per_host_delay: 0 gave %s, unset %s", zero.HostDelay(), unset.HostDelay()))
	}
	if zero.RedirectLimit() != 0 || unset.RedirectLimit() != DefaultMaxRedirects {
		assert.Fail(t, fmt.Sprintf("max_redirects: 0 gave %d, unset %d", zero.RedirectLimit(), unset.RedirectLimit()))
	}
	if zero.HostRetryCount() != 0 || zero.HostRetryBackoff() != 0 {
		assert.Fail(t, fmt.Sprintf("host_retries 0 gave %d, retry_backoff 0 gave %s", zero.HostRetryCount(), zero.HostRetryBackoff()))
	}
	// WithDefaults is idempotent: the workflow, the activities and the
	// scheduler each call it again on the starter's defaulted config.
	assert.Equal(t, zero, zero.WithDefaults(), "WithDefaults twice")
}

func TestZeroRefused(t *testing.T) {
	for _, key := range []string{"fetchers", "fetcher_concurrency", "max_pages", "max_pages_per_host",
		"max_duration", "per_host_concurrency", "body_cap", "max_attempts", "restart_alert"} {
		if rule, ok := ZeroRefused(key); !ok || rule == "" {
			assert.Fail(t, fmt.Sprintf("ZeroRefused(%q) = %q, %v; want a rule", key, rule, ok))
		}
	}
	for _, key := range []string{"max_depth", "per_host_delay", "max_redirects", "host_retries",
		"retry_backoff", "fail_after", "id"} {
		rule, ok := ZeroRefused(key)
		assert.Falsef(t, ok, "ZeroRefused(%q) = %q; 0 is a value of it (or Validate refuses it)", key, rule)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://guest:guest@127.0.0.1:5672/":    "amqp://guest:***@127.0.0.1:5672/",
		"amqp://u%40x:p%3Aw@host/vhost":         "amqp://u%40x:***@host/vhost",
		"amqp://127.0.0.1:5672/":                "amqp://127.0.0.1:5672/",
		"amqp://guest@127.0.0.1/":               "amqp://guest@127.0.0.1/",
		"postgres://db/crawl?password=hunter2":  "postgres://db/crawl?password=***",
		"postgres://u:pw@db/crawl?password=pw2": "postgres://u:***@db/crawl?password=***",
	} {
		assert.Equalf(t, want, Redact(in), "Redact(%q)", in)
	}
}

func TestRulesWithHostMerges(t *testing.T) {
	r := Rules{}.WithHost(HostRule{Host: "a.example", Concurrency: new(2)})
	r = r.WithHost(HostRule{Host: "A.example", Delay: new(time.Second)})
	r = r.WithExclude("/x/").WithExclude("/x/")
	if r.Version != 4 || len(r.Hosts) != 1 || len(r.Exclude) != 1 {
		require.FailNow(t, fmt.Sprintf("rules %+v: want version 4, one host rule, one exclude", r))
	}
	d, n := Config{Live: r}.PolitenessFor("a.example")
	if d != time.Second || n != 2 {
		assert.Fail(t, fmt.Sprintf("a.example: delay %s, concurrency %d; want 1s and the earlier rule's 2", d, n))
	}
}

// A campaign's seed hosts are bounded in number and in bytes: the config
// rides in every activity's input.
func TestSeedHostsBounded(t *testing.T) {
	cfg := Config{ID: "c", SeedsFile: "seeds.gz", Sinks: []string{"warc:/tmp/x"}}.WithDefaults()
	for i := range MaxSeedHosts {
		cfg.SeedHosts = append(cfg.SeedHosts, fmt.Sprintf("h%d.example", i))
	}
	require.NoError(t, cfg.Validate(), "%d short host names", MaxSeedHosts)
	cfg.SeedHosts = append(cfg.SeedHosts, "one-more.example")
	require.ErrorContains(t, cfg.Validate(), "seed_hosts: 1001 hosts", "%d hosts", MaxSeedHosts+1)
	cfg.SeedHosts = nil
	for i := range 200 {
		cfg.SeedHosts = append(cfg.SeedHosts, fmt.Sprintf("%0200d.example", i))
	}
	require.ErrorContains(t, cfg.Validate(), "at most 1000 hosts and 32768 bytes", "200 long host names (%d bytes)", cfg.SeedHostBytes())
	cfg.SeedHosts, cfg.SeedsFile = nil, ""
	require.ErrorContains(t, cfg.Validate(), "seeds: at least one seed URL is required", "neither seeds nor a seeds file")
}
