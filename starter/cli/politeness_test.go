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
	code, _, errOut := run(t, fake, nil, "start", "--id", "c1", "--seed", "https://a.example/", "--politeness-key", "ip")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, `politeness_key "ip": must be host, domain or group`)
	assert.Empty(t, fake.started)
}
