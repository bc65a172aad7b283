package campaign

import (
	"strings"
	"testing"
	"time"
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
		{"unparseable seed", func(c *Config) { c.Seeds = []string{"ht!tp://x"} }, `seed "ht!tp://x": not a valid URL`},
		{"ftp seed", func(c *Config) { c.Seeds = []string{"ftp://x/"} }, "must be an http or https URL"},
		{"bad scope", func(c *Config) { c.Scope = []string{"("} }, `scope "(": not a valid regular expression`},
		{"too many fetchers", func(c *Config) { c.Fetchers = 5000 }, "fetchers 5000: must be between 0 and 1024"},
		{"negative delay", func(c *Config) { c.PerHostDelay = -time.Second }, "per_host_delay -1s"},
		{"unknown priority", func(c *Config) { c.Priority = "random" }, `priority "random": must be one of`},
		{"kafka sink", func(c *Config) { c.Sinks = []string{"kafka://k:9092/pages"} }, ""},
		{"default brokers", func(c *Config) { c.Sinks = []string{"kafka:///pages"} }, ""},
		{"kafka without topic", func(c *Config) { c.Sinks = []string{"kafka://k:9092/"} }, "must be kafka://HOST:PORT/TOPIC"},
		{"warc", func(c *Config) { c.Sinks = []string{"warc:/var/crawl"} }, ""},
		{"secret in sink", func(c *Config) { c.Sinks = []string{"postgres://u:hunter2@db/crawl"} }, "must not carry a password"},
		{"secret parameter", func(c *Config) { c.Sinks = []string{"postgres://db/crawl?password=hunter2"} }, "must not carry a password"},
		{"unknown sink", func(c *Config) { c.Sinks = []string{"s3://bucket"} }, "unknown kind"},
		{"notify not http", func(c *Config) { c.NotifyURL = "mailto:ops@example.org" }, "notify_url"},
		{"tiny body cap", func(c *Config) { c.BodyCap = 10 }, "body_cap 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.WithDefaults().Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
}

func TestPolitenessFor(t *testing.T) {
	c := Config{PerHostDelay: time.Second, PerHostConcurrency: 1, Hosts: []HostRule{{Host: "Big.example", Delay: 100 * time.Millisecond, Concurrency: 4}}}
	if d, n := c.PolitenessFor("big.example"); d != 100*time.Millisecond || n != 4 {
		t.Errorf("override: %s, %d", d, n)
	}
	if d, n := c.PolitenessFor("other.example"); d != time.Second || n != 1 {
		t.Errorf("default: %s, %d", d, n)
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
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
