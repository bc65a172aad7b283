package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
)

// outcome is what one value of a field gives: the field's value in the
// started campaign's config, or the error line `start` prints (exit 2).
type outcome struct {
	want any
	err  string
}

func value(v any) outcome      { return outcome{want: v} }
func refused(e string) outcome { return outcome{err: e} }

// TestZeroUnsetNegative goes through every number of the campaign config,
// as a flag (those that have one) and as a YAML key of `-f`: left out, it
// takes its default; 0 is the value docs/operating.md gives it or is
// refused; a negative is refused. Each error names the field and its
// range.
func TestZeroUnsetNegative(t *testing.T) {
	const host = "h.example"
	top := func(key string) func(string) string {
		return func(v string) string {
			if v == "" {
				return ""
			}
			return key + ": " + v + "\n"
		}
	}
	hostRule := func(key string) func(string) string {
		return func(v string) string {
			if v == "" {
				return "hosts: [{host: " + host + "}]\n"
			}
			return "hosts:\n  - host: " + host + "\n    " + key + ": " + v + "\n"
		}
	}
	depth := func(c campaign.Config) any {
		if n, ok := c.DepthLimit(); ok {
			return n
		}
		return "no limit"
	}
	cases := []struct {
		name      string
		flag      string                // "" when the field has no flag
		yaml      func(v string) string // the file's line(s) for value v ("": left out)
		neg       string
		get       func(campaign.Config) any
		unset     outcome
		zero, bad outcome // at 0 and at neg
	}{
		{"fetchers", "fetchers", top("fetchers"), "-1", func(c campaign.Config) any { return c.Fetchers },
			value(4), refused("fetchers 0: must be between 1 and 1024"), refused("fetchers -1: must be between 1 and 1024")},
		{"fetcher_concurrency", "", top("fetcher_concurrency"), "-1", func(c campaign.Config) any { return c.FetcherConcurrency },
			value(32), refused("fetcher_concurrency 0: must be between 1 and 1024"), refused("fetcher_concurrency -1: must be between 1 and 1024")},
		{"max_pages", "max-pages", top("max_pages"), "-1", func(c campaign.Config) any { return c.MaxPages },
			value(int64(0)), refused("max_pages 0: must be 1 or more; leave it out for no limit"), refused("max_pages -1: must be 1 or more")},
		{"max_pages_per_host", "max-pages-per-host", top("max_pages_per_host"), "-1", func(c campaign.Config) any { return c.MaxPagesPerHost },
			value(int64(0)), refused("max_pages_per_host 0: must be 1 or more; leave it out for no limit"), refused("max_pages_per_host -1: must be 1 or more")},
		{"max_depth", "max-depth", top("max_depth"), "-1", depth,
			value("no limit"), value(0), refused("max_depth -1: must be 0 (the seeds only) or more")},
		{"max_duration", "max-duration", top("max_duration"), "-1s", func(c campaign.Config) any { return c.MaxDuration },
			value(time.Duration(0)), refused("max_duration 0: must be more than 0; leave it out for no limit"), refused("max_duration -1s: must be more than 0")},
		{"per_host_concurrency", "per-host-concurrency", top("per_host_concurrency"), "-1", func(c campaign.Config) any { return c.PerHostConcurrency },
			value(1), refused("per_host_concurrency 0: must be between 1 and 256"), refused("per_host_concurrency -1: must be between 1 and 256")},
		{"per_host_delay", "per-host-delay", top("per_host_delay"), "-1s", func(c campaign.Config) any { return c.HostDelay() },
			value(time.Second), value(time.Duration(0)), refused("per_host_delay -1s: must be between 0 (no delay) and 1h")},
		{"body_cap", "", top("body_cap"), "-1", func(c campaign.Config) any { return c.BodyCap },
			value(int64(0)), refused("body_cap 0: must be between 1024 and 1099511627776 bytes; leave it out for no cap"), refused("body_cap -1: must be between 1024")},
		{"max_redirects", "", top("max_redirects"), "-1", func(c campaign.Config) any { return c.RedirectLimit() },
			value(10), value(0), refused("max_redirects -1: must be between 0 (follow none) and 30")},
		{"max_attempts", "", top("max_attempts"), "-1", func(c campaign.Config) any { return c.MaxAttempts },
			value(3), refused("max_attempts 0: must be between 1 and 20"), refused("max_attempts -1: must be between 1 and 20")},
		{"restart_alert", "", top("restart_alert"), "-1", func(c campaign.Config) any { return c.RestartAlert },
			value(5), refused("restart_alert 0: must be between 1 and 1000"), refused("restart_alert -1: must be between 1 and 1000")},
		{"host_retries", "host-retries", top("host_retries"), "-1", func(c campaign.Config) any { return c.HostRetryCount() },
			value(campaign.DefaultHostRetries), value(0), refused("host_retries -1: must be between 0 (the first failure decides) and 20")},
		{"retry_backoff", "retry-backoff", top("retry_backoff"), "-1s", func(c campaign.Config) any { return c.HostRetryBackoff() },
			value(15 * time.Second), value(time.Duration(0)), refused("retry_backoff -1s: must be between 0 (retry at once) and 1h")},
		{"fail_after", "fail-after", top("fail_after"), "-1s", func(c campaign.Config) any { return c.FailAfterDuration() },
			value(5 * time.Minute), refused("fail_after 0s: must be between 10s and 24h"), refused("fail_after -1s: must be between 10s and 24h")},
		{"hosts delay", "", hostRule("delay"), "-1s", func(c campaign.Config) any { d, _ := c.PolitenessFor(host); return d },
			value(time.Second), value(time.Duration(0)), refused(`hosts "h.example": delay -1s: must be between 0 (no delay) and 1h`)},
		{"hosts concurrency", "", hostRule("concurrency"), "-1", func(c campaign.Config) any { _, n := c.PolitenessFor(host); return n },
			value(1), refused(`hosts "h.example": concurrency 0: must be between 1 and 256`), refused(`hosts "h.example": concurrency -1: must be between 1 and 256`)},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		for _, v := range []struct {
			name  string
			typed string
			want  outcome
		}{{"unset", "", tc.unset}, {"0", "0", tc.zero}, {tc.neg, tc.neg, tc.bad}} {
			check := func(t *testing.T, args ...string) {
				fake := newFake()
				code, _, errOut := run(t, fake, nil, append([]string{"start"}, args...)...)
				if v.want.err != "" {
					assert.Equal(t, ExitUsage, code, "exit code")
					assert.Contains(t, errOut, v.want.err)
					assert.Empty(t, fake.started, "refused, yet started")
					return
				}
				require.Equal(t, ExitOK, code, errOut)
				assert.Equal(t, v.want.want, tc.get(startedConfig(t, fake)))
			}
			if tc.flag != "" {
				t.Run(tc.name+"/flag/"+v.name, func(t *testing.T) {
					args := []string{"--id", "z", "--seed", "https://a.example/"}
					if v.typed != "" {
						args = append(args, "--"+tc.flag+"="+v.typed)
					}
					check(t, args...)
				})
			}
			t.Run(tc.name+"/yaml/"+v.name, func(t *testing.T) {
				path := filepath.Join(dir, "c.yaml")
				require.NoError(t, os.WriteFile(path, []byte("id: z\nseeds: [https://a.example/]\n"+tc.yaml(v.typed)), 0o600))
				check(t, "-f", path)
			})
		}
	}
}

// TestConfigFileZeroDurations: a duration may be 0 with or without a unit,
// anywhere in the file; the decoder's messages keep their line numbers.
func TestConfigFileZeroDurations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`id: z
seeds: [https://a.example/]
hosts: [{host: a.example, delay: 0}, {host: b.example, delay: 0s, concurrency: 2}]
per_host_delay: 0   # no delay

retry_backoff: 0m
`), 0o600))
	cfg, zeros, err := readConfigFile(path)
	require.NoError(t, err)
	assert.Empty(t, zeros)
	assert.Equal(t, time.Duration(0), cfg.HostDelay())
	assert.Equal(t, time.Duration(0), cfg.HostRetryBackoff())
	for _, h := range []string{"a.example", "b.example"} {
		d, _ := cfg.PolitenessFor(h)
		assert.Equal(t, time.Duration(0), d, h)
	}

	require.NoError(t, os.WriteFile(path, []byte("id: z\nper_host_delay: 0\n\nper_host_delay_typo: 1s\n"), 0o600))
	_, _, err = readConfigFile(path)
	assert.ErrorContains(t, err, "line 4: field per_host_delay_typo not found")
}
