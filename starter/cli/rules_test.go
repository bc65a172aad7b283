package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/workflows"
)

// rulesFake is a fake with the running campaign news, which has two live
// rules already: the next change is version 3.
func rulesFake() *fakeTemporal {
	fake := newFake()
	fake.add("news", workflows.Status{}, Execution{Status: StatusRunning})
	fake.rules = campaign.Rules{Version: 2, Exclude: []string{`\.pdf$`}, Hosts: []campaign.HostRule{{Host: "old.example", Concurrency: new(1)}}}
	return fake
}

func TestExclude(t *testing.T) {
	fake := rulesFake()
	code, out, errOut := run(t, fake, nil, "exclude", "news", "/calendar/")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, []any{workflows.RulesRequest{Exclude: "/calendar/"}}, fake.updates)
	assert.Equal(t, `campaign news: excluding "/calendar/" (rules version 3; URLs it matches that were queued are settled as "excluded": starter failures news --reason excluded)`+"\n", out)
	assert.Empty(t, errOut)

	// A regular expression is printed as typed, its backslashes single.
	code, out, errOut = run(t, fake, nil, "exclude", "news", `\?sid=\d+`)
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, `campaign news: excluding "\?sid=\d+" (rules version 4;`)
}

func TestExcludeJSON(t *testing.T) {
	fake := rulesFake()
	code, out, errOut := run(t, fake, nil, "exclude", "news", "/calendar/", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var res workflows.RulesResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, workflows.RulesResult{Rules: fake.rules}, res, "the result as the workflow gave it")
	assert.Equal(t, []string{`\.pdf$`, "/calendar/"}, res.Rules.Exclude)
	var raw map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw), out)
	assert.EqualValues(t, 3, raw["rules"]["version"])
}

func TestExcludeRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		re   string
		err  error // the workflow's answer
		code int
		want string // all of stderr
	}{
		{"invalid regex", "news", "(", nil, ExitUsage,
			"exclude \"(\": not a valid regular expression: error parsing regexp: missing closing ): `(`\n"},
		{"empty regex", "news", "", nil, ExitUsage,
			"Error: REGEX is empty; give the part of the URLs to exclude, such as /calendar/\nRun 'starter exclude --help' for usage.\n"},
		{"no such campaign", "nope", "/calendar/", nil, ExitFailure, "no campaign nope\n"},
		{"ended campaign", "old", "/calendar/", nil, ExitFailure,
			"campaign old has ended (stopped); start it again with `starter start --id old ...`\n"},
		{"refused by the workflow", "news", "/calendar/",
			&UpdateRejectedError{Message: "campaign news is stopping: its rules can no longer change"}, ExitFailure,
			"exclude \"/calendar/\": campaign news is stopping: its rules can no longer change\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := rulesFake()
			fake.add("old", workflows.Status{}, Execution{Status: StatusCompleted, State: campaign.StateStopped})
			fake.updateErr = tc.err
			code, out, errOut := run(t, fake, nil, "exclude", tc.id, tc.re)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.want, errOut)
			assert.Empty(t, out)
			if tc.err == nil {
				assert.Empty(t, fake.updates, "the rules changed")
			}
		})
	}
}

// TestHostFlags: the flags given are the rule's fields, those left out
// nil; --delay 0 is a value (no delay), not left out.
func TestHostFlags(t *testing.T) {
	at := func(s string) *time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return &tm
	}
	for _, tc := range []struct {
		name  string
		flags []string
		rule  campaign.HostRule
		line  string
	}{
		{"delay 0", []string{"--delay", "0"}, campaign.HostRule{Host: "news.example", Delay: new(time.Duration(0))},
			"host news.example: delay 0s (none), concurrency as started, block as started"},
		{"delay", []string{"--delay", "1.5s"}, campaign.HostRule{Host: "news.example", Delay: new(1500 * time.Millisecond)},
			"host news.example: delay 1.5s, concurrency as started, block as started"},
		{"concurrency", []string{"--concurrency", "4"}, campaign.HostRule{Host: "news.example", Concurrency: new(4)},
			"host news.example: delay as started, concurrency 4, block as started"},
		{"block for a duration", []string{"--block-until", "10m"}, campaign.HostRule{Host: "news.example", BlockUntil: at("2026-11-29T12:10:00Z")},
			"host news.example: delay as started, concurrency as started, blocked until 2026-11-29T12:10:00Z"},
		{"block until a time", []string{"--block-until", "2026-11-30T08:00:00+01:00"}, campaign.HostRule{Host: "news.example", BlockUntil: at("2026-11-30T08:00:00+01:00")},
			"host news.example: delay as started, concurrency as started, blocked until 2026-11-30T08:00:00+01:00"},
		{"all three", []string{"--delay", "0s", "--concurrency", "256", "--block-until", "1h"},
			campaign.HostRule{Host: "news.example", Delay: new(time.Duration(0)), Concurrency: new(256), BlockUntil: at("2026-11-29T13:00:00Z")},
			"host news.example: delay 0s (none), concurrency 256, blocked until 2026-11-29T13:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := rulesFake()
			code, out, errOut := run(t, fake, nil, append([]string{"host", "news", "news.example"}, tc.flags...)...)
			require.Equal(t, ExitOK, code, errOut)
			require.Len(t, fake.updates, 1)
			req := fake.updates[0].(workflows.RulesRequest)
			assert.Empty(t, req.Exclude)
			require.NotNil(t, req.Host)
			assert.Equal(t, tc.rule, *req.Host)
			assert.Equal(t, "campaign news: "+tc.line+" (rules version 3, from the host's next lease)\n", out)
		})
	}
}

func TestHostJSON(t *testing.T) {
	fake := rulesFake()
	code, out, errOut := run(t, fake, nil, "host", "news", "news.example", "--delay", "0", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var res workflows.RulesResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, workflows.RulesResult{Rules: fake.rules}, res)
	require.Len(t, res.Rules.Hosts, 2)
	require.NotNil(t, res.Rules.Hosts[1].Delay, "delay 0 was lost on the way")
	assert.Zero(t, *res.Rules.Hosts[1].Delay)
	assert.Contains(t, out, `"delay": "0s"`)
}

// TestHostPrintsTheRuleAsItStands: the line is the host's rule in the
// workflow's answer, which a later version of the rules may have changed,
// rather than the rule asked for.
func TestHostPrintsTheRuleAsItStands(t *testing.T) {
	fake := rulesFake()
	fake.rulesAnswer = &workflows.RulesResult{Rules: campaign.Rules{Version: 9, Hosts: []campaign.HostRule{
		{Host: "other.example", Delay: new(time.Minute)},
		{Host: "NEWS.example", Delay: new(2 * time.Second), Concurrency: new(2)},
	}}}
	code, out, errOut := run(t, fake, nil, "host", "news", "news.example", "--delay", "2s")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "campaign news: host NEWS.example: delay 2s, concurrency 2, block as started (rules version 9, from the host's next lease)\n", out)
}

func TestHostRefused(t *testing.T) {
	usage := func(msg string) string { return "Error: " + msg + "\nRun 'starter host --help' for usage.\n" }
	for _, tc := range []struct {
		name string
		args []string
		err  error // the workflow's answer
		code int
		want string // all of stderr
	}{
		{"no flag", []string{"news", "news.example"}, nil, ExitUsage,
			usage("give at least one of --delay, --concurrency and --block-until")},
		{"concurrency 0", []string{"news", "news.example", "--concurrency", "0"}, nil, ExitUsage,
			"hosts \"news.example\": concurrency 0: must be between 1 and 256\n"},
		{"concurrency 257 and delay over 1h", []string{"news", "news.example", "--concurrency", "257", "--delay", "61m"}, nil, ExitUsage,
			"hosts \"news.example\": delay 1h1m0s: must be between 0 (no delay) and 1h\nhosts \"news.example\": concurrency 257: must be between 1 and 256\n"},
		{"negative delay", []string{"news", "news.example", "--delay", "-1s"}, nil, ExitUsage,
			"hosts \"news.example\": delay -1s: must be between 0 (no delay) and 1h\n"},
		{"block until the past", []string{"news", "news.example", "--block-until", "2026-11-29T11:59:59Z"}, nil, ExitUsage,
			usage("--block-until 2026-11-29T11:59:59Z: is not in the future")},
		{"block for no time", []string{"news", "news.example", "--block-until", "0s"}, nil, ExitUsage,
			usage("--block-until 0s: a duration from now must be more than 0")},
		{"block until no time", []string{"news", "news.example", "--block-until", "tomorrow"}, nil, ExitUsage,
			usage("--block-until \"tomorrow\": want a time in RFC 3339 (2026-12-06T18:00:00Z) or a duration from now (10m)")},
		{"a URL for HOST", []string{"news", "https://news.example/", "--delay", "1s"}, nil, ExitUsage,
			usage("HOST \"https://news.example/\": a host name such as news.example, without scheme, port or path")},
		{"a port in HOST", []string{"news", "news.example:8080", "--delay", "1s"}, nil, ExitUsage,
			usage("HOST \"news.example:8080\": a host name such as news.example, without scheme, port or path")},
		{"no such campaign", []string{"nope", "news.example", "--delay", "1s"}, nil, ExitFailure, "no campaign nope\n"},
		{"ended campaign", []string{"old", "news.example", "--delay", "1s"}, nil, ExitFailure,
			"campaign old has ended (stopped); start it again with `starter start --id old ...`\n"},
		{"refused by the workflow", []string{"news", "news.example", "--delay", "1s"},
			&UpdateRejectedError{Message: "live rules: at most 256 excludes and 256 host rules"}, ExitFailure,
			"host news.example: live rules: at most 256 excludes and 256 host rules\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := rulesFake()
			fake.add("old", workflows.Status{}, Execution{Status: StatusCompleted, State: campaign.StateStopped})
			fake.updateErr = tc.err
			code, out, errOut := run(t, fake, nil, append([]string{"host"}, tc.args...)...)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.want, errOut)
			assert.Empty(t, out)
			if tc.err == nil {
				assert.Empty(t, fake.updates, "the rules changed")
			}
		})
	}
}
