package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
)

func TestFetcherPoolSharesPerCampaign(t *testing.T) {
	p := fetcherPool{m: map[string]*pooledFetcher{}}
	cfg := campaign.Config{ID: "c1", Seeds: []string{"http://127.0.0.1/"}, Fetchers: 2}.WithDefaults()
	f1, rel1, err := p.acquire(cfg)
	require.NoError(t, err)
	f2, rel2, err := p.acquire(cfg)
	require.NoError(t, err)
	require.Same(t, f1, f2, "two sessions of one campaign got two Fetchers: each holds its own connections")
	other := cfg
	other.ID = "c2"
	f3, rel3, err := p.acquire(other)
	require.NoError(t, err)
	require.NotSame(t, f1, f3, "two campaigns share a Fetcher")
	changed := cfg
	changed.AllowPrivate = !cfg.AllowPrivate
	f4, rel4, err := p.acquire(changed)
	require.NoError(t, err)
	require.NotSame(t, f1, f4, "a session with other settings got the campaign's shared Fetcher")
	rel4()
	rel1()
	require.Len(t, p.m, 2, "pooled after one of two releases")
	rel2()
	rel3()
	require.Empty(t, p.m, "pooled after every release")
	f5, rel5, err := p.acquire(cfg)
	require.NoError(t, err)
	defer rel5()
	require.NotSame(t, f1, f5, "a Fetcher closed with its last session was handed out again")
}
