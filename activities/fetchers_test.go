package activities

import (
	"testing"

	"github.com/drover-crawl/drover/campaign"
)

func TestFetcherPoolSharesPerCampaign(t *testing.T) {
	p := fetcherPool{m: map[string]*pooledFetcher{}}
	cfg := campaign.Config{ID: "c1", Seeds: []string{"http://127.0.0.1/"}, Fetchers: 2}.WithDefaults()
	f1, rel1, err := p.acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f2, rel2, err := p.acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f1 != f2 {
		t.Fatal("two sessions of one campaign got two Fetchers: each holds its own connections")
	}
	other := cfg
	other.ID = "c2"
	f3, rel3, err := p.acquire(other)
	if err != nil {
		t.Fatal(err)
	}
	if f3 == f1 {
		t.Fatal("two campaigns share a Fetcher")
	}
	changed := cfg
	changed.AllowPrivate = !cfg.AllowPrivate
	f4, rel4, err := p.acquire(changed)
	if err != nil {
		t.Fatal(err)
	}
	if f4 == f1 {
		t.Fatal("a session with other settings got the campaign's shared Fetcher")
	}
	rel4()
	rel1()
	if len(p.m) != 2 {
		t.Fatalf("after one of two releases: %d pooled, want 2", len(p.m))
	}
	rel2()
	rel3()
	if len(p.m) != 0 {
		t.Fatalf("after every release: %d pooled, want 0", len(p.m))
	}
	f5, rel5, err := p.acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rel5()
	if f5 == f1 {
		t.Fatal("a Fetcher closed with its last session was handed out again")
	}
}
