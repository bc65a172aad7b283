// Package sinkuri is the table of sink kinds as their URIs name them: the
// prefix of each kind, the form its URI must have, and where its password
// comes from instead of the URI. It links nothing but the standard
// library, so that package campaign (which the scheduler and the workflow
// link) checks a sink URI by the same rules as package sink, which opens
// it with the sinks' drivers. Package sink's kinds table gives each kind
// here its open and check.
package sinkuri

import (
	"fmt"
	"net/url"
	"strings"
)

// Kind is one kind of sink.
type Kind struct {
	// Name is the kind's name: the sinks' metrics label, the prefix of
	// sink.Check's errors and page.Location's Kind.
	Name string
	// Prefixes are how a URI of the kind starts ("kafka://").
	Prefixes []string
	// Form is the URI's form, for the message of an unknown kind.
	Form string
	// PasswordEnv is where a worker takes the password from, which the
	// URI must not carry; empty for a kind whose URI is not a URL with
	// user info and a query (warc:DIR), which Check does not parse.
	PasswordEnv string
	// rule checks the rest of the URI's form, after the password rules;
	// u is nil for a kind without PasswordEnv.
	rule func(s string, u *url.URL) error
}

// The kinds of sink.
var (
	Kafka = &Kind{
		Name:        "kafka",
		Prefixes:    []string{"kafka://"},
		Form:        "kafka://HOST:PORT/TOPIC",
		PasswordEnv: "KAFKA_SASL_PASSWORD",
		rule: func(s string, u *url.URL) error {
			if strings.Trim(u.Path, "/") == "" {
				return fmt.Errorf("sink %q: must be kafka://HOST:PORT/TOPIC (or kafka:///TOPIC for the worker's KAFKA_BROKERS)", s)
			}
			return nil
		},
	}
	WARC = &Kind{
		Name:     "warc",
		Prefixes: []string{"warc:"},
		Form:     "warc:DIR",
		rule: func(s string, _ *url.URL) error {
			_, err := ParseWARC(s)
			return err
		},
	}
	Postgres = &Kind{
		Name:        "postgres",
		Prefixes:    []string{"postgres://", "postgresql://"},
		Form:        "postgres://HOST/DB",
		PasswordEnv: "PGPASSWORD (or PGPASSFILE)",
	}
)

// WARCSink is what a warc:DIR[?OPTIONS] URI says.
type WARCSink struct {
	Dir string
	// Captures: records=captures, each page's response or revisit record
	// alone (records=full, the default: its request and metadata records
	// too).
	Captures bool
}

// ParseWARC reads a warc:DIR[?OPTIONS] URI. DIR ends at the first "?";
// the one option is records (full or captures), and any other is refused.
func ParseWARC(s string) (WARCSink, error) {
	dir, query, _ := strings.Cut(strings.TrimPrefix(s, "warc:"), "?")
	if dir == "" {
		return WARCSink{}, fmt.Errorf("sink %q: warc:DIR needs a directory", s)
	}
	w := WARCSink{Dir: dir}
	opts, err := url.ParseQuery(query)
	if err != nil {
		return w, fmt.Errorf("sink %q: its options: %v", s, err)
	}
	for k, vs := range opts {
		switch v := vs[len(vs)-1]; {
		case k == "records" && v == "full":
		case k == "records" && v == "captures":
			w.Captures = true
		case k == "records":
			return w, fmt.Errorf("sink %q: records=%s: must be full (request, response or revisit, metadata) or captures (the response or revisit record alone)", s, v)
		default:
			return w, fmt.Errorf("sink %q: unknown option %q; warc:DIR takes records=full|captures", s, k)
		}
	}
	return w, nil
}

// Kinds are every kind of sink, in the order an unknown kind's message
// lists them.
var Kinds = []*Kind{Kafka, WARC, Postgres}

// Lookup is the kind a URI names by its prefix, nil for none.
func Lookup(s string) *Kind {
	for _, k := range Kinds {
		for _, p := range k.Prefixes {
			if strings.HasPrefix(s, p) {
				return k
			}
		}
	}
	return nil
}

// Rest is s after its kind's prefix: warc:DIR's DIR.
func (k *Kind) Rest(s string) string {
	for _, p := range k.Prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest
		}
	}
	return s
}

// Check checks the form of a sink URI (kafka://HOST:PORT/TOPIC, warc:DIR,
// postgres://...) and refuses one that carries a password: credentials
// come from the worker's environment, never from the config.
func Check(s string) error {
	k := Lookup(s)
	if k == nil {
		forms := make([]string, len(Kinds))
		for i, k := range Kinds {
			forms[i] = k.Form
		}
		last := len(forms) - 1
		return fmt.Errorf("sink %q: unknown kind; use %s or %s", Redact(s), strings.Join(forms[:last], ", "), forms[last])
	}
	if k.PasswordEnv == "" {
		return k.rule(s, nil)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("sink %q: not a valid URI: %v", Redact(s), err)
	}
	// The config is the workflow's input: Temporal keeps it in the
	// campaign's history and the Web UI shows it.
	if _, has := u.User.Password(); has {
		return fmt.Errorf("sink %q: must not carry a password (Temporal's history and the Web UI show a campaign's config); set %s in the workers' environment instead", Redact(s), k.PasswordEnv)
	}
	if u.Query().Has("password") {
		return fmt.Errorf("sink %q: must not carry a password parameter (Temporal's history and the Web UI show a campaign's config); set %s in the workers' environment instead", Redact(s), k.PasswordEnv)
	}
	if k.rule != nil {
		return k.rule(s, u)
	}
	return nil
}

// Redact returns a URI with its password, in its user info or as a
// password= query parameter, replaced by ***, for messages and logs.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URI)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "***")
		u.RawQuery = strings.ReplaceAll(q.Encode(), "%2A%2A%2A", "***")
	}
	if u.User == nil {
		return u.String()
	}
	if _, ok := u.User.Password(); !ok {
		return u.String()
	}
	// Built by hand: url.UserPassword would percent-encode the asterisks.
	user := u.User.Username()
	u.User = nil
	scheme, rest, _ := strings.Cut(u.String(), "://")
	return scheme + "://" + url.User(user).String() + ":***@" + rest
}
