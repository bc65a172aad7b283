package campaign

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClockKey(t *testing.T) {
	groups := map[string]string{"a.example.org": "one", "example.net": "two", "www.example.com": "two"}
	cases := []struct {
		key, host, want string
	}{
		{"", "www.example.org", "www.example.org"},
		{KeyHost, "www.example.org", "www.example.org"},
		{KeyDomain, "www.example.org", "domain:example.org"},
		{KeyDomain, "example.org", "domain:example.org"},
		{KeyDomain, "a.b.example.co.uk", "domain:example.co.uk"},
		{KeyDomain, "h3.drover.test", "domain:drover.test"},
		{KeyDomain, "127.0.0.1", "127.0.0.1"},
		{KeyDomain, "[::1]", "[::1]"},
		{KeyDomain, "co.uk", "co.uk"}, // a public suffix has no registered domain
		{KeyDomain, "localhost", "localhost"},
		{KeyGroup, "a.example.org", "group:one"},
		{KeyGroup, "b.example.org", "b.example.org"}, // its domain is in no group
		{KeyGroup, "cdn.example.net", "group:two"},   // by its registered domain
		{KeyGroup, "www.example.com", "group:two"},
		{KeyGroup, "example.com", "example.com"},
		{KeyIP, "www.example.org", "www.example.org"}, // until a fetcher reports its IP
	}
	for _, c := range cases {
		cfg := Config{PolitenessKey: c.key}
		if c.key == KeyGroup {
			cfg.PolitenessGroups = groups
		}
		assert.Equalf(t, c.want, cfg.ClockKey(c.host), "key %q, host %q", c.key, c.host)
	}
}
