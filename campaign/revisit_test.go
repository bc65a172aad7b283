package campaign

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The interval starts at Min, shrinks by Factor on a change and grows by
// it without one, within [Min, Max]; Max unset keeps Min.
func TestRevisitRuleNext(t *testing.T) {
	r := RevisitRule{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, Factor: 4}
	var got []time.Duration
	iv := time.Duration(0)
	for range 7 {
		iv = r.Next(iv, false)
		got = append(got, iv)
	}
	want := []time.Duration{10 * time.Minute, 40 * time.Minute, 160 * time.Minute, 640 * time.Minute, 2560 * time.Minute, 7 * 24 * time.Hour, 7 * 24 * time.Hour}
	for i := range want {
		assert.Equalf(t, want[i], got[i], "unchanged interval %d", i)
	}
	assert.Equal(t, 640*time.Minute, r.Next(2560*time.Minute, true), "changed after 2560m")
	assert.Equal(t, 10*time.Minute, r.Next(20*time.Minute, true), "changed after 20m: want the minimum")
	fixed := RevisitRule{Min: time.Hour}
	assert.Equal(t, time.Hour, fixed.Next(time.Hour, false), "max unset: want min")
	assert.Equalf(t, 2*time.Hour, (RevisitRule{Min: time.Hour, Max: 8 * time.Hour}).Next(time.Hour, false), "factor unset: want %d times", DefaultRevisitFactor)
}

// The first rule that fits decides, by depth, URL regex and media type
// prefix.
func TestRevisitsFor(t *testing.T) {
	seeds, sections := 0, 1
	rs, err := CompileRevisits([]RevisitRule{
		{Depth: &seeds, Min: 30 * time.Second},
		{Depth: &sections, Match: "/section/", Min: 45 * time.Second},
		{Match: "/news/", MIME: "text/html", Min: time.Minute},
		{MIME: "image/", Min: time.Hour},
		{Match: `\.pdf$`, Min: 2 * time.Hour},
	})
	require.NoError(t, err)
	cases := []struct {
		url   string
		depth int
		mime  string
		want  time.Duration // 0: none
	}{
		{"http://a/news/1", 2, "text/html; charset=utf-8", time.Minute},
		{"http://a/news/1", 2, "TEXT/HTML", time.Minute},
		{"http://a/news/1.png", 2, "image/png", time.Hour},
		{"http://a/news/1", 2, "", 0}, // a failure: no rule without a MIME fits
		{"http://a/x.pdf", 2, "", 2 * time.Hour},
		{"http://a/about", 2, "text/html", 0},
		{"http://a/about", 0, "", 30 * time.Second}, // a seed, failed or not
		{"http://a/section/1", 1, "text/html", 45 * time.Second},
		{"http://a/section/1", 2, "text/html", 0},
		{"http://a/news/1", 1, "text/html", time.Minute},
	}
	for _, c := range cases {
		r := rs.For(c.url, c.depth, c.mime)
		switch {
		case r == nil && c.want != 0, r != nil && r.Min != c.want:
			assert.Fail(t, fmt.Sprintf("For(%s, %d, %q) = %+v, want the rule of min %s", c.url, c.depth, c.mime, r, c.want))
		}
	}
	none, _ := CompileRevisits(nil)
	assert.Nil(t, none.For("http://a/", 0, "text/html"), "no rules fit something")
}

// --revisit reads its keys in any order, match last with its commas,
// days as a unit; a bad one is one clear error.
func TestParseRevisitRule(t *testing.T) {
	r, err := ParseRevisitRule("min=10m,max=7d,factor=1.5,mime=text/html,depth=0,match=^https://a/(b|c),d")
	require.NoError(t, err)
	zero := 0
	want := RevisitRule{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, Factor: 1.5, MIME: "text/html", Depth: &zero, Match: "^https://a/(b|c),d"}
	assert.Equal(t, want, r, "parsed")
	for in, msg := range map[string]string{
		"max=1h":            "min is required",
		"min=10m,factor=0":  "0 is no factor",
		"min=10m,every=1h":  "unknown key",
		"min=ten":           "min",
		"min=10m,max":       "not key=value",
		"min=10m,max=1.5d":  "days must be a whole number",
		"min=10m,max=-3d":   "days must be a whole number",
		"min=10m,max=9999d": "days must be a whole number",
		"min=10m,depth=-1":  "0 (the seeds) or more",
		"min=10m,depth=one": "depth",
	} {
		_, err := ParseRevisitRule(in)
		assert.ErrorContainsf(t, err, msg, "%q", in)
	}
}

// Validate refuses a rule that would hammer a site or cannot apply.
func TestValidateRevisit(t *testing.T) {
	base := Config{ID: "c", Seeds: []string{"http://a.example/"}}.WithDefaults()
	for _, c := range []struct {
		rules     []RevisitRule
		noHistory bool
		msg       string
	}{
		{[]RevisitRule{{Min: 500 * time.Millisecond}}, false, "must be at least 1s"},
		{[]RevisitRule{{Min: time.Hour, Max: time.Minute}}, false, "must be at least min"},
		{[]RevisitRule{{Min: time.Hour, Factor: 0.5}}, false, "factor 0.5"},
		{[]RevisitRule{{Min: time.Hour, Match: "("}}, false, "match"},
		{[]RevisitRule{{Min: time.Hour}}, true, "no_history"},
		{[]RevisitRule{{Min: time.Hour, Depth: new(-1)}}, false, "depth -1"},
	} {
		cfg := base
		cfg.Revisit, cfg.NoHistory = c.rules, c.noHistory
		assert.ErrorContainsf(t, cfg.Validate(), c.msg, "%+v (no_history %v)", c.rules, c.noHistory)
	}
	dedup := base
	dedup.Dedup, dedup.NoHistory = true, true
	assert.ErrorContains(t, dedup.Validate(), "dedup", "dedup without a history")
	ok := base
	ok.Revisit = []RevisitRule{{Min: time.Hour, Max: 24 * time.Hour, Factor: 2, Match: "/news/"}}
	if err := ok.Validate(); err != nil || !ok.Continuous() {
		assert.Fail(t, fmt.Sprintf("a good rule: %v, continuous %v", err, ok.Continuous()))
	}
}
