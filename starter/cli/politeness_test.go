package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
)

func TestStartPolitenessGroups(t *testing.T) {
	fake := newFake()
	code, _, errOut := run(t, fake, nil, "start", "--id", "c1", "--seed", "https://a.example/",
		"--politeness-key", "group", "--politeness-group", "a.example=news", "--politeness-group", "example.net=news")
	require.Equal(t, ExitOK, code, errOut)
	cfg := startedConfig(t, fake)
	assert.Equal(t, campaign.KeyGroup, cfg.PolitenessKey)
	assert.Equal(t, map[string]string{"a.example": "news", "example.net": "news"}, cfg.PolitenessGroups)
	assert.Contains(t, fake.started[0].Details, "politeness key")
}

func TestStartPolitenessKeyRefused(t *testing.T) {
	fake := newFake()
	code, _, errOut := run(t, fake, nil, "start", "--id", "c1", "--seed", "https://a.example/", "--politeness-key", "asn")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, `politeness_key "asn": must be host, domain, group or ip`)
	assert.Empty(t, fake.started)
}

func TestStartPolitenessKeyIP(t *testing.T) {
	fake := newFake()
	code, _, errOut := run(t, fake, nil, "start", "--id", "c1", "--seed", "https://a.example/", "--politeness-key", "ip")
	require.Equal(t, ExitOK, code, errOut)
	cfg := startedConfig(t, fake)
	assert.Equal(t, campaign.KeyIP, cfg.PolitenessKey)
	assert.Equal(t, "a.example", cfg.ClockKey("a.example"), "the shard stays the host's")
	assert.Contains(t, fake.started[0].Details, "IP address")
}
