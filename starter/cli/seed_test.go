package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/workflows"
)

func TestInclude(t *testing.T) {
	fake := rulesFake()
	code, out, errOut := run(t, fake, nil, "include", "news", `^https://blog[.]example/`)
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, []any{workflows.RulesRequest{Include: `^https://blog[.]example/`}}, fake.updates)
	assert.Contains(t, out, `campaign news: including "^https://blog[.]example/" (rules version 3;`)

	code, _, errOut = run(t, fake, nil, "include", "news", "(")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, `include "(": not a valid regular expression`)
}

// The commands refuse what they cannot do before asking anything.
func TestSeedAndURLsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"seed", "news"}, "give the seed list: --file PATH"},
		{[]string{"urls", "news", "--host", "a.example", "--state", "waiting"}, `--state "waiting": give one of queued, leased, held, parked, failed or done`},
		{[]string{"urls", "news", "--host", "a.example:80", "--state", "held"}, "a host name such as news.example"},
		{[]string{"urls", "news", "--host", "a.example", "--state", "held", "--limit", "0"}, "--limit 0: must be between 1 and 1000"},
		{[]string{"start", "--id", "x"}, "--seeds-file"},
	} {
		fake := rulesFake()
		code, _, errOut := run(t, fake, nil, tc.args...)
		assert.Equal(t, ExitUsage, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.want, "%v", tc.args)
		assert.Empty(t, fake.updates, "%v", tc.args)
	}
}

// A list served over HTTP is the workflow's to stream: the starter sends
// the Update with its URL and nothing else.
func TestSeedURLGoesToTheWorkflow(t *testing.T) {
	fake := rulesFake()
	code, out, errOut := run(t, fake, nil, "seed", "news", "--file", "https://lists.example/s.gz")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, []any{workflows.SeedFileRequest{Source: "https://lists.example/s.gz"}}, fake.updates)
	assert.Contains(t, out, "campaign news: 0 seeds queued from https://lists.example/s.gz")
}

// fakeSeeds is a scheduler's control session that queues each URL once.
type fakeSeeds struct {
	queued map[string]int
	cfgs   []campaign.Config
}

func (f *fakeSeeds) dial(context.Context, string, string) (seedfile.Control, error) { return f, nil }

func (f *fakeSeeds) AddSeeds(_ context.Context, cfg campaign.Config, urls []string) (int, error) {
	f.cfgs = append(f.cfgs, cfg)
	n := 0
	for _, u := range urls {
		if f.queued[u] == 0 {
			n++
		}
		f.queued[u]++
	}
	return n, nil
}

func (f *fakeSeeds) Close() error { return nil }

// More seeds than a config carries are streamed before the start, to the
// run the starter names, and the workflow's input carries their hosts.
func TestStartStreamsManySeeds(t *testing.T) {
	fake := newFake()
	seeds := &fakeSeeds{queued: map[string]int{}}
	args := []string{"start", "--id", "big", "--no-preflight"}
	for i := range campaign.MaxInlineSeeds + 50 {
		args = append(args, "--seed", fmt.Sprintf("http://h%d.example/p/%d", i%3, i))
	}
	code, _, errOut := runApp(t, &App{Dial: dialTo(fake), Stats: refusedStats, SeedControl: seeds.dial, Now: func() time.Time { return clock }}, args...)
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, errOut, "campaign big: 150 seeds queued from the 150 seeds of the config")
	require.Len(t, fake.started, 1)
	cfg := fake.started[0].Input.(workflows.CampaignInput).Config
	assert.Empty(t, cfg.Seeds, "no seed in the input")
	assert.Equal(t, []string{"h0.example", "h1.example", "h2.example"}, cfg.SeedHosts)
	assert.NotEmpty(t, cfg.Run, "the starter named the run")
	assert.Len(t, seeds.queued, 150)
	for _, c := range seeds.cfgs {
		assert.Equal(t, cfg.FrontierKey(), c.FrontierKey(), "the seeds went to the run started")
	}
}
