package campaign

import (
	"strings"
	"testing"
	"time"
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
		if got[i] != want[i] {
			t.Errorf("unchanged interval %d: %s, want %s", i, got[i], want[i])
		}
	}
	if d := r.Next(2560*time.Minute, true); d != 640*time.Minute {
		t.Errorf("changed after 2560m: %s, want 640m", d)
	}
	if d := r.Next(20*time.Minute, true); d != 10*time.Minute {
		t.Errorf("changed after 20m: %s, want the minimum", d)
	}
	fixed := RevisitRule{Min: time.Hour}
	if d := fixed.Next(time.Hour, false); d != time.Hour {
		t.Errorf("max unset: %s, want min", d)
	}
	if d := (RevisitRule{Min: time.Hour, Max: 8 * time.Hour}).Next(time.Hour, false); d != 2*time.Hour {
		t.Errorf("factor unset: %s, want %d times", d, DefaultRevisitFactor)
	}
}

// The first rule that fits decides, by URL regex and media type prefix.
func TestRevisitsFor(t *testing.T) {
	rs, err := CompileRevisits([]RevisitRule{
		{Match: "/news/", MIME: "text/html", Min: time.Minute},
		{MIME: "image/", Min: time.Hour},
		{Match: `\.pdf$`, Min: 2 * time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url, mime string
		want      time.Duration // 0: none
	}{
		{"http://a/news/1", "text/html; charset=utf-8", time.Minute},
		{"http://a/news/1", "TEXT/HTML", time.Minute},
		{"http://a/news/1.png", "image/png", time.Hour},
		{"http://a/news/1", "", 0}, // a failure: no rule without a MIME fits
		{"http://a/x.pdf", "", 2 * time.Hour},
		{"http://a/about", "text/html", 0},
	}
	for _, c := range cases {
		r := rs.For(c.url, c.mime)
		switch {
		case r == nil && c.want != 0, r != nil && r.Min != c.want:
			t.Errorf("For(%s, %q) = %+v, want the rule of min %s", c.url, c.mime, r, c.want)
		}
	}
	if none, _ := CompileRevisits(nil); none.For("http://a/", "text/html") != nil {
		t.Error("no rules fit something")
	}
}

// --revisit reads its keys in any order, match last with its commas,
// days as a unit; a bad one is one clear error.
func TestParseRevisitRule(t *testing.T) {
	r, err := ParseRevisitRule("min=10m,max=7d,factor=1.5,mime=text/html,match=^https://a/(b|c),d")
	if err != nil {
		t.Fatal(err)
	}
	want := RevisitRule{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, Factor: 1.5, MIME: "text/html", Match: "^https://a/(b|c),d"}
	if r != want {
		t.Errorf("parsed %+v, want %+v", r, want)
	}
	for in, msg := range map[string]string{
		"max=1h":            "min is required",
		"min=10m,factor=0":  "0 is no factor",
		"min=10m,every=1h":  "unknown key",
		"min=ten":           "min",
		"min=10m,max":       "not key=value",
		"min=10m,max=1.5d":  "days must be a whole number",
		"min=10m,max=-3d":   "days must be a whole number",
		"min=10m,max=9999d": "days must be a whole number",
	} {
		if _, err := ParseRevisitRule(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an error saying %q", in, err, msg)
		}
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
	} {
		cfg := base
		cfg.Revisit, cfg.NoHistory = c.rules, c.noHistory
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v (no_history %v): %v, want an error saying %q", c.rules, c.noHistory, err, c.msg)
		}
	}
	ok := base
	ok.Revisit = []RevisitRule{{Min: time.Hour, Max: 24 * time.Hour, Factor: 2, Match: "/news/"}}
	if err := ok.Validate(); err != nil || !ok.Continuous() {
		t.Errorf("a good rule: %v, continuous %v", err, ok.Continuous())
	}
}
