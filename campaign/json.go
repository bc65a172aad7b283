package campaign

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// JSON: the config is the Campaign workflow's input, which the Temporal Web
// UI and `temporal workflow show` print as JSON, and which an operator may
// write by hand (`temporal workflow start --input`). Its durations are
// written as Go duration strings ("per_host_delay": "1s") instead of
// encoding/json's nanoseconds (1000000000), which nobody reads at a glance.
//
// They are read in both forms: the histories of campaigns started before
// this change hold numbers, and a worker replaying them must decode the same
// config (workflows.TestReplayRecordedHistory replays two such histories).
//
// Every time.Duration field of Config and HostRule must be shadowed below;
// TestJSONDurationsAreStrings finds a new one that is not.

// jsonDuration is a time.Duration in JSON: written as a string such as
// "1.5s", read from such a string or from a number of nanoseconds.
type jsonDuration time.Duration

// MarshalJSON writes the duration as time.Duration.String does ("0s",
// "250ms", "1h0m0s").
func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string ("1s", "0", "1h30m") or, as
// encoding/json wrote time.Duration before, a whole number of nanoseconds.
// null leaves the duration as it is, as encoding/json does for numbers.
func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a number and a unit, such as \"1s\", \"250ms\" or \"5m\"", s)
		}
		*d = jsonDuration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"1s\" (or a whole number of nanoseconds)", b)
	}
	*d = jsonDuration(n)
	return nil
}

// configFields is Config without its methods, so that encoding it inside
// configJSON does not recurse into Config's own MarshalJSON.
type configFields Config

// configJSON is Config as it is encoded: its duration fields shadow the
// embedded ones of the same JSON name (encoding/json takes the shallower),
// so every other field, a new one included, is encoded as it is declared.
// The shadowing fields come after the others in the output.
type configJSON struct {
	*configFields
	MaxDuration  jsonDuration  `json:"max_duration,omitempty"`
	PerHostDelay *jsonDuration `json:"per_host_delay,omitempty"`
	RetryBackoff *jsonDuration `json:"retry_backoff,omitempty"`
	FailAfter    *jsonDuration `json:"fail_after,omitempty"`
}

// MarshalJSON encodes the config with its durations as strings ("1s"); a
// nil pointer is left out, as before (unset), and a zero one is "0s".
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(configJSON{
		configFields: (*configFields)(&c),
		MaxDuration:  jsonDuration(c.MaxDuration),
		PerHostDelay: (*jsonDuration)(c.PerHostDelay),
		RetryBackoff: (*jsonDuration)(c.RetryBackoff),
		FailAfter:    (*jsonDuration)(c.FailAfter),
	})
}

// UnmarshalJSON decodes a config whose durations are strings ("1s") or
// numbers of nanoseconds (inputs written before). As with encoding/json, a
// key absent from the input leaves its field as it was.
func (c *Config) UnmarshalJSON(b []byte) error {
	j := configJSON{
		configFields: (*configFields)(c),
		MaxDuration:  jsonDuration(c.MaxDuration),
		PerHostDelay: (*jsonDuration)(c.PerHostDelay),
		RetryBackoff: (*jsonDuration)(c.RetryBackoff),
		FailAfter:    (*jsonDuration)(c.FailAfter),
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	c.MaxDuration = time.Duration(j.MaxDuration)
	c.PerHostDelay = (*time.Duration)(j.PerHostDelay)
	c.RetryBackoff = (*time.Duration)(j.RetryBackoff)
	c.FailAfter = (*time.Duration)(j.FailAfter)
	return nil
}

type hostRuleFields HostRule

// hostRuleJSON is HostRule as it is encoded: see configJSON.
type hostRuleJSON struct {
	*hostRuleFields
	Delay *jsonDuration `json:"delay,omitempty"`
}

// MarshalJSON encodes the rule with its delay as a string ("250ms").
func (h HostRule) MarshalJSON() ([]byte, error) {
	return json.Marshal(hostRuleJSON{hostRuleFields: (*hostRuleFields)(&h), Delay: (*jsonDuration)(h.Delay)})
}

// UnmarshalJSON decodes a rule whose delay is a string or a number of
// nanoseconds.
func (h *HostRule) UnmarshalJSON(b []byte) error {
	j := hostRuleJSON{hostRuleFields: (*hostRuleFields)(h), Delay: (*jsonDuration)(h.Delay)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	h.Delay = (*time.Duration)(j.Delay)
	return nil
}
