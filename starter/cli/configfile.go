package cli

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/drover-crawl/drover/campaign"
)

// readConfigFile reads a YAML campaign.Config (`-f campaign.yaml`). An
// unknown key is an error, so that a typo does not silently crawl with a
// default. A key given is set and a key left out is unset, also for 0:
//
//   - a duration may be written 0, without a unit (`per_host_delay: 0`),
//     which yaml.v3 alone refuses for a time.Duration;
//   - zeros lists the plain number keys given as 0, where 0 is not a value
//     (campaign.ZeroRefused), for the caller to refuse with Validate's
//     errors.
func readConfigFile(path string) (cfg campaign.Config, zeros []error, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, nil, usagef("-f: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return cfg, nil, usagef("-f %s: %v", path, err)
	}
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		var fix []*yaml.Node
		zeros, fix = yamlZeros(doc.Content[0])
		data = unitZeros(data, fix)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return cfg, nil, usagef("-f %s: %v", path, err)
	}
	return cfg, zeros, nil
}

// durationKeys are the YAML keys of Config's and HostRule's durations.
var durationKeys = func() map[string]bool {
	keys := map[string]bool{}
	d := reflect.TypeFor[time.Duration]()
	for _, t := range []reflect.Type{reflect.TypeFor[campaign.Config](), reflect.TypeFor[campaign.HostRule]()} {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Type == d || f.Type == reflect.PointerTo(d) {
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				keys[name] = true
			}
		}
	}
	return keys
}()

// yamlZeros walks the top-level mapping (and the hosts list) of a config
// file: it returns the refused zeros of plain number keys, and the plain
// scalars 0 of duration keys, to be written 0s.
func yamlZeros(top *yaml.Node) (zeros []error, unitless []*yaml.Node) {
	walk := func(m *yaml.Node, nested bool) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			key, v := m.Content[i].Value, m.Content[i+1]
			if v.Kind != yaml.ScalarNode || !isZero(v.Value) {
				continue
			}
			if rule, refused := campaign.ZeroRefused(key); refused && !nested {
				zeros = append(zeros, fmt.Errorf("%s 0: %s", key, rule))
			}
			if durationKeys[key] && v.Tag == "!!int" {
				unitless = append(unitless, v)
			}
		}
	}
	walk(top, false)
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "hosts" && top.Content[i+1].Kind == yaml.SequenceNode {
			for _, h := range top.Content[i+1].Content {
				if h.Kind == yaml.MappingNode {
					walk(h, true)
				}
			}
		}
	}
	return zeros, unitless
}

// unitZeros appends the unit "s" to each of the scalars (0 written without a
// unit) in the file's text, in place, so that the decoder's messages keep
// their line numbers.
func unitZeros(data []byte, scalars []*yaml.Node) []byte {
	if len(scalars) == 0 {
		return data
	}
	lines := strings.SplitAfter(string(data), "\n")
	// From the last to the first, so that an insertion does not move the
	// columns of the scalars still to do on the same line.
	slices.SortFunc(scalars, func(a, b *yaml.Node) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	for i := len(scalars) - 1; i >= 0; i-- {
		n := scalars[i]
		if n.Line < 1 || n.Line > len(lines) {
			continue
		}
		line := []rune(lines[n.Line-1])
		end := n.Column - 1 + len([]rune(n.Value))
		if n.Column < 1 || end > len(line) || string(line[n.Column-1:end]) != n.Value {
			continue // not where the parser said: leave it to the decoder's error
		}
		lines[n.Line-1] = string(line[:end]) + "s" + string(line[end:])
	}
	return []byte(strings.Join(lines, ""))
}

// isZero reports whether a flag's or a YAML scalar's text is the number 0
// or a zero duration ("0", "0s", "0m", "+0", "0x0", ...).
func isZero(s string) bool {
	if n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64); err == nil {
		return n == 0
	}
	d, err := time.ParseDuration(s)
	return err == nil && d == 0
}
