package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		{[]string{"urls", "news", "--host", "a.example", "--state", "done"}, `--state "done": give one of leased, held, failed`},
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
