package campaign

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONDurations: durations are written as strings, a zero pointer as
// "0s" (0 is a value) and a nil one not at all (unset); the result decodes
// to the same config.
func TestJSONDurations(t *testing.T) {
	c := Config{
		ID: "c1", Seeds: []string{"https://a.example/"}, Fetchers: 2,
		MaxDuration:  90 * time.Minute,
		PerHostDelay: new(250 * time.Millisecond),
		RetryBackoff: new(time.Duration(0)),
		FailAfter:    new(5 * time.Minute),
		Hosts: []HostRule{
			{Host: "slow.example", Delay: new(2 * time.Second), Concurrency: new(1)},
			{Host: "fast.example", Delay: new(time.Duration(0))},
			{Host: "other.example", Concurrency: new(4)},
		},
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	got := string(b)
	for _, want := range []string{
		`"max_duration":"1h30m0s"`, `"per_host_delay":"250ms"`, `"retry_backoff":"0s"`, `"fail_after":"5m0s"`,
		`{"host":"slow.example","concurrency":1,"delay":"2s"}`, `{"host":"fast.example","delay":"0s"}`,
		`{"host":"other.example","concurrency":4}`, `"id":"c1"`, `"fetchers":2`,
	} {
		assert.Contains(t, got, want, "encoded config")
	}
	assert.NotContains(t, got, `"max_depth"`, "an unset pointer was written")
	var again Config
	require.NoError(t, json.Unmarshal(b, &again))
	assert.Equal(t, c, again, "round trip")

	// Unset stays unset through a round trip, and the defaults survive one.
	for _, in := range []Config{{ID: "unset"}, c.WithDefaults(), Config{ID: "d"}.WithDefaults()} {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		var out Config
		require.NoError(t, json.Unmarshal(b, &out))
		assert.Equalf(t, in, out, "round trip of %s", b)
	}
}

// TestJSONOldNumbers: inputs written before durations were strings (the
// histories of running campaigns) hold nanoseconds; they decode to the same
// durations, and a mix of both forms decodes too.
func TestJSONOldNumbers(t *testing.T) {
	// The config of workflows/testdata/failed_campaign_history.json, as the
	// starter wrote it then.
	old := `{"id":"notopic-473360807","seeds":["http://127.61.0.1:45865/"],"fetchers":2,
		"per_host_delay":1000000000,"max_duration":3600000000000,"retry_backoff":15000000000,
		"fail_after":20000000000,"hosts":[{"host":"h","delay":250000000,"concurrency":2},{"host":"z","delay":0}]}`
	var c Config
	require.NoError(t, json.Unmarshal([]byte(old), &c))
	want := map[string]time.Duration{
		"per_host_delay": time.Second, "max_duration": time.Hour, "retry_backoff": 15 * time.Second,
		"fail_after": 20 * time.Second, "hosts[0].delay": 250 * time.Millisecond, "hosts[1].delay": 0,
	}
	got := map[string]time.Duration{
		"per_host_delay": c.HostDelay(), "max_duration": c.MaxDuration, "retry_backoff": c.HostRetryBackoff(),
		"fail_after": c.FailAfterDuration(), "hosts[0].delay": deref(c.Hosts[0].Delay), "hosts[1].delay": deref(c.Hosts[1].Delay),
	}
	assert.Equal(t, want, got, "old numbers decoded")
	assert.NotNil(t, c.Hosts[1].Delay, "hosts[1].delay 0: decoded as unset, want 0 (no delay)")

	var mixed Config
	require.NoError(t, json.Unmarshal([]byte(`{"per_host_delay":"1s","fail_after":20000000000,"max_duration":"0","hosts":[{"host":"h","delay":"1m"}]}`), &mixed))
	if mixed.HostDelay() != time.Second || mixed.FailAfterDuration() != 20*time.Second || mixed.MaxDuration != 0 || *mixed.Hosts[0].Delay != time.Minute {
		assert.Fail(t, fmt.Sprintf("mixed forms: %+v", mixed))
	}
}

func deref(d *time.Duration) time.Duration {
	if d == nil {
		return -1
	}
	return *d
}

// TestJSONDurationErrors: a duration that is neither a duration string nor
// a whole number is refused with the value in the error; null leaves the
// field as it was, as encoding/json does.
func TestJSONDurationErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"per_host_delay":"1 sec"}`:           `duration "1 sec": want a number and a unit`,
		`{"per_host_delay":"1"}`:               `duration "1": want a number and a unit`,
		`{"max_duration":1.5}`:                 `duration 1.5: want a string such as "1s"`,
		`{"fail_after":true}`:                  `duration true: want a string`,
		`{"hosts":[{"host":"h","delay":"x"}]}`: `duration "x"`,
	} {
		var c Config
		err := json.Unmarshal([]byte(in), &c)
		assert.ErrorContains(t, err, want, in)
	}
	c := Config{MaxDuration: time.Minute, PerHostDelay: new(time.Second)}
	require.NoError(t, json.Unmarshal([]byte(`{"max_duration":null,"per_host_delay":null}`), &c))
	if c.MaxDuration != time.Minute || c.PerHostDelay != nil {
		assert.Fail(t, fmt.Sprintf("null: max_duration %s, per_host_delay %v; want 1m0s kept and per_host_delay unset", c.MaxDuration, c.PerHostDelay))
	}
}

// TestJSONDurationsAreStrings finds every time.Duration field of Config and
// HostRule by reflection, so that a new one that json.go does not shadow
// (and would write as nanoseconds) fails here.
func TestJSONDurationsAreStrings(t *testing.T) {
	d := reflect.TypeFor[time.Duration]()
	check := func(v any) {
		rv := reflect.ValueOf(v).Elem()
		var keys []string
		for i := range rv.NumField() {
			f := rv.Type().Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch f.Type {
			case d:
				rv.Field(i).SetInt(int64(3 * time.Second))
			case reflect.PointerTo(d):
				rv.Field(i).Set(reflect.ValueOf(new(3 * time.Second)))
			default:
				continue
			}
			keys = append(keys, key)
		}
		require.NotEmptyf(t, keys, "%T: no duration field found", v)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		for _, k := range keys {
			assert.Containsf(t, string(b), `"`+k+`":"3s"`, "%T.%s is not written as a duration string", v, k)
		}
	}
	check(&Config{})
	check(&HostRule{Host: "h"})
}
