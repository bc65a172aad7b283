package urlrule

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		// RFC 3986 section 6.2.2: case, percent-encoding, dot segments.
		{"HTTP://www.Example.COM/", "http://www.example.com/"},
		{"http://example.com/%7Efoo", "http://example.com/~foo"},
		{"http://example.com/a/./b/../b/%63/%7bfoo%7d", "http://example.com/a/b/c/%7Bfoo%7D"},
		{"http://example.com/%3a%2f", "http://example.com/%3A%2F"},
		// RFC 3986 section 6.2.3: scheme-based normalization.
		{"http://example.com", "http://example.com/"},
		{"http://example.com:/", "http://example.com/"},
		{"http://example.com:80/", "http://example.com/"},
		{"https://example.com:443/x", "https://example.com/x"},
		{"http://example.com:443/", "http://example.com:443/"},
		{"https://example.com:80/", "https://example.com:80/"},
		{"http://example.com:0080/", "http://example.com/"},
		{"http://EXAMPLE.com:8080", "http://example.com:8080/"},
		// Fragment, query.
		{"http://e.com/a#frag", "http://e.com/a"},
		{"http://e.com/?", "http://e.com/"},
		{"http://e.com/?b=2&a=1", "http://e.com/?b=2&a=1"},
		{"http://e.com/?q=a+b&r=%2f%41", "http://e.com/?q=a+b&r=%2FA"},
		{"http://e.com/?q=a b", "http://e.com/?q=a%20b"},
		{"http://e.com/p?x=/a/../b", "http://e.com/p?x=/a/../b"},
		// Hosts.
		{"http://bücher.example/", "http://xn--bcher-kva.example/"},
		{"http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"},
		{"http://e.com./", "http://e.com/"},
		{"http://[::FFFF:1.2.3.4]:80/", "http://[::ffff:1.2.3.4]/"},
		{"http://[2001:DB8:0::1]:8080/", "http://[2001:db8::1]:8080/"},
		{"http://my_host.example/", "http://my_host.example/"},
		{"http://r3---sn-abc.example/", "http://r3---sn-abc.example/"},
		{"http://user:pass@e.com/", "http://e.com/"},
		// What HTML attributes carry.
		{"  http://e.com/a\n", "http://e.com/a"},
		{"http://e.com/a\tb", "http://e.com/ab"},
		{"http://e.com/a b", "http://e.com/a%20b"},
		{"http://e.com/ü", "http://e.com/%C3%BC"},
		{"http://e.com/100%", "http://e.com/100%25"},
		{"http://e.com/%zz", "http://e.com/%25zz"},
		{`http://e.com\a\b?c\d`, `http://e.com/a/b?c%5Cd`},
		{"http://e.com/a|b<c>", "http://e.com/a%7Cb%3Cc%3E"},
		{"http://e.com/a;b=c/d@e:f", "http://e.com/a;b=c/d@e:f"},
		{"http://e.com/.%2e/x", "http://e.com/x"},
	}
	checkNormalized(t, nil, cases)
}

// checkNormalized checks that Normalize, dropping the parameters drop,
// turns each case's in into its want, and leaves that as it is.
func checkNormalized(t *testing.T, drop []string, cases []struct{ in, want string }) {
	t.Helper()
	for _, c := range cases {
		got, err := Normalize(c.in, nil, drop)
		if !assert.NoErrorf(t, err, "Normalize(%q)", c.in) {
			continue
		}
		assert.Equal(t, c.want, got, fmt.Sprint("for ", c.in))
		again, err := Normalize(got, nil, drop)
		assert.True(t, err == nil && again == got, fmt.Sprint("not idempotent: ", got, " -> ", again))
	}
}

// TestNormalizeResolve is RFC 3986 section 5.4 (reference resolution),
// fragments dropped.
func TestNormalizeResolve(t *testing.T) {
	base, _ := url.Parse("http://a/b/c/d;p?q")
	cases := []struct{ ref, want string }{
		{"g:h", ""}, // not http: refused
		{"g", "http://a/b/c/g"},
		{"./g", "http://a/b/c/g"},
		{"g/", "http://a/b/c/g/"},
		{"/g", "http://a/g"},
		{"//g", "http://g/"},
		{"?y", "http://a/b/c/d;p?y"},
		{"g?y", "http://a/b/c/g?y"},
		{"#s", "http://a/b/c/d;p?q"},
		{"g#s", "http://a/b/c/g"},
		{"g?y#s", "http://a/b/c/g?y"},
		{";x", "http://a/b/c/;x"},
		{"g;x", "http://a/b/c/g;x"},
		{"", "http://a/b/c/d;p?q"},
		{".", "http://a/b/c/"},
		{"./", "http://a/b/c/"},
		{"..", "http://a/b/"},
		{"../", "http://a/b/"},
		{"../g", "http://a/b/g"},
		{"../..", "http://a/"},
		{"../../", "http://a/"},
		{"../../g", "http://a/g"},
		// Abnormal examples (section 5.4.2).
		{"../../../g", "http://a/g"},
		{"../../../../g", "http://a/g"},
		{"/./g", "http://a/g"},
		{"/../g", "http://a/g"},
		{"g.", "http://a/b/c/g."},
		{".g", "http://a/b/c/.g"},
		{"g..", "http://a/b/c/g.."},
		{"..g", "http://a/b/c/..g"},
		{"./../g", "http://a/b/g"},
		{"./g/.", "http://a/b/c/g/"},
		{"g/./h", "http://a/b/c/g/h"},
		{"g/../h", "http://a/b/c/h"},
		{"g;x=1/./y", "http://a/b/c/g;x=1/y"},
		{"g;x=1/../y", "http://a/b/c/y"},
		{"g?y/./x", "http://a/b/c/g?y/./x"},
		{"g#s/../x", "http://a/b/c/g"},
		{"http:g", ""}, // strict parser: no host
	}
	for _, c := range cases {
		got, err := Normalize(c.ref, base, nil)
		if c.want == "" {
			assert.True(t, err != nil, fmt.Sprint("Normalize(", c.ref, ") = ", got, ", want an error"))
			continue
		}
		if !assert.NoErrorf(t, err, "Normalize(%q)", c.ref) {
			continue
		}
		assert.Equal(t, c.want, got, fmt.Sprint("for ", c.ref))
	}
}

func TestNormalizeDropParams(t *testing.T) {
	drop := []string{"utm_source", "utm_medium", "sid"}
	cases := []struct{ in, want string }{
		{"http://e.com/?utm_source=x&a=1&utm_medium=y&b=2", "http://e.com/?a=1&b=2"},
		{"http://e.com/?utm_source=x", "http://e.com/"},
		{"http://e.com/?sid&a=1", "http://e.com/?a=1"},
		{"http://e.com/?%73id=1&a=1", "http://e.com/?a=1"},
		{"http://e.com/?SID=1", "http://e.com/?SID=1"},
		{"http://e.com/?b=1&a=2&b=3", "http://e.com/?b=1&a=2&b=3"},
	}
	checkNormalized(t, drop, cases)
}

func TestNormalizeRefused(t *testing.T) {
	cases := []struct {
		in   string
		want error
	}{
		{"mailto:a@b.c", ErrScheme},
		{"javascript:alert(1)", ErrScheme},
		{"data:text/html,hi", ErrScheme},
		{"ftp://e.com/", ErrScheme},
		{"tel:+123", ErrScheme},
		{"http:///path", ErrNoHost},
		{"http://", ErrNoHost},
		{"/relative/without/base", ErrScheme},
		{"http://e.com/" + strings.Repeat("a", 2100), ErrURLTooLong},
		{"http://e.com/" + strings.Repeat("%", 700), ErrURLTooLong}, // grows past 2048 once encoded
		{"http://xn--a.com/", ErrHost},
		{"http://a\u200db.com/", ErrHost},
		{"http://e.com:99999/", ErrHost},
		{"http://e v.com/", ErrInvalidURL},
		{"http://e.com/a\x00b", ErrInvalidURL},
		{"http://a..b/", ErrHost},
		{"", ErrInvalidURL},
	}
	for _, c := range cases {
		got, err := Normalize(c.in, nil, nil)
		assert.True(t, errors.Is(err, c.want), fmt.Sprint("Normalize(", c.in[:min(len(c.in), 40)], ") = ", got, ", ", err, "; want ", c.want))
	}
}

func TestHostKey(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://Example.COM:8080/x", "example.com"},
		{"https://bücher.example/", "xn--bcher-kva.example"},
		{"http://[::1]:80/", "[::1]"},
		{"http://e.com./", "e.com"},
	}
	for _, c := range cases {
		got, err := HostKey(c.in)
		assert.True(t, err == nil, err)
		assert.Equal(t, c.want, got)
	}
	_, err := HostKey("mailto:x@y")
	assert.True(t, err != nil, "mailto has no host")
}
