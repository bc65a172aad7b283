package urlrule

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzSeeds are links of every kind normalize_test.go and the benchmarks
// use, and the corner cases of the fast paths: escapes valid and not, dot
// segments spelled out and escaped, backslashes, spaces, tabs.
var fuzzSeeds = append([]string{
	"HTTP://www.Example.COM/", "http://example.com/a/./b/../b/%63/%7bfoo%7d",
	"http://e.com/100%", "http://e.com/%zz", "http://e.com/%4%41", "%%41",
	`http://e.com\a\b?c\d`, "http://e.com/.%2e/x", "http://e.com/a.b/c.", "a/..",
	"..", ".", "./", "g;x=1/../y", "http://[2001:DB8:0::1]:8080/", "//g",
	"?y", "#s", "", " \t/a\nb ", "http://bücher.example/ü?q=a b&utm_source=x",
	"http://e.com/p?x=/a/../b&sid=1#f", "/.../x/..../y", "http://e.com:0080",
}, benchLinks...)

// fuzzBases are the pages links are resolved against; "" is no base.
var fuzzBases = []string{"", benchBase, "http://a/b/c/d;p?q", "http://e.com", "https://x.example/%7Ea/b.c/"}

// FuzzNormalizeMatchesReference holds Normalize, with its fast paths, to
// the reference normalizer (normalize_ref_test.go) for any link, base and
// dropped parameters: the same normal form, or the same error.
func FuzzNormalizeMatchesReference(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, uint8(i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, raw string, baseIdx, dropMask uint8) {
		var base *url.URL
		if b := fuzzBases[int(baseIdx)%len(fuzzBases)]; b != "" {
			base, _ = url.Parse(b)
		}
		var drop []string
		for i, p := range []string{"utm_source", "sid", "q", "a b"} {
			if dropMask&(1<<i) != 0 {
				drop = append(drop, p)
			}
		}
		got, err := Normalize(raw, base, drop)
		want, wantErr := refNormalize(raw, base, drop)
		if got != want || (err == nil) != (wantErr == nil) {
			require.FailNow(t, fmt.Sprintf("Normalize(%q, %v, %q) = %q, %v; reference %q, %v", raw, base, drop, got, err, want, wantErr))
		}
		for _, e := range []error{ErrURLTooLong, ErrScheme, ErrNoHost, ErrHost, ErrInvalidURL} {
			require.Equalf(t, errors.Is(wantErr, e), errors.Is(err, e), "Normalize(%q): error %v; reference %v; errors.Is %v", raw, err, wantErr, e)
		}
	})
}

// FuzzFastHost holds fastHost, normalHost's fast path, to normalHost.
func FuzzFastHost(f *testing.F) {
	for _, h := range []string{"example.com", "a..b", ".a", "a.", "Example.com", "xn--bcher-kva.example", "my_host", "::1", "bücher.example", "a-.b", ""} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got, err := fastHost(h)
		want, wantErr := normalHost(h)
		if got != want || (err == nil) != (wantErr == nil) {
			require.FailNow(t, fmt.Sprintf("fastHost(%q) = %q, %v; normalHost %q, %v", h, got, err, want, wantErr))
		}
	})
}
