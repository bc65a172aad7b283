package urlrule

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

// hostKeySlow is HostKey without its fast path: the parse every input
// took before it.
func hostKeySlow(raw string) (string, error) {
	u, err := parseTrimmed(raw)
	if err != nil {
		return "", err
	}
	return normalHost(u.Hostname())
}

var hostKeySeeds = []string{
	"http://example.com/", "https://a.example.com:8443/x?y=1#z", "http://e.com",
	"http://E.com/", "http://e.com./", "http://.e.com/", "http://e..com/",
	"http://xn--bcher-kva.example/", "http://xn--zz.example/", "http://bücher.example/",
	"http://[::1]:80/", "http://u:p@e.com/", "http://e.com:80:80/", "http://e.com:8a/",
	"http://e.com:/", "http://e.com/%zz", "http://e.com/%4", "http://e.com/a%41",
	"http://e.com/#%zz", "http://e.com/?%zz", "http://e.com/a b", "http://e.com/\x7f",
	"http://e.com/\x00", " http://e.com/", "http://e.com/\t", "http://e_x-1.com/",
	"http://127.0.0.1:8080/", "http://e%41.com/", "http://", "https://:80/",
	"http:///x", "http://e.com?x", "http://e.com#f", "HTTP://e.com/", "ftp://e.com/",
	"http://e.com/a%2Fb?x=%zz", "http://e.com/%41", "http://e.com/a\"b", "http://e.com/é", "http://e.com/a;b,c=d:e@f!$&'()*+?q#f?g",
	"http://e.com?", "http://e.com/?", "http://e.com/p?#", "http://e.com/[x]", "http://e.com/a|b^c{d}",
}

func TestHostKeyFastAgreesWithTheParse(t *testing.T) {
	for _, s := range hostKeySeeds {
		checkHostKeyFast(t, s)
	}
	// The fast path must take what Normalize writes, or it is no fast path.
	for _, s := range []string{"http://example.com/", "https://a.example.com:8443/x?y=1#z", "http://e.com/a%41", "http://e.com", "http://127.0.0.1:8080/p?q"} {
		_, ok := hostKeyFast(s)
		assert.True(t, ok, fmt.Sprint("fast path refused ", s))
	}
}

func FuzzHostKeyFast(f *testing.F) {
	for _, s := range hostKeySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkHostKeyFast(t, s) })
}

// checkHostKeyFast fails t when hostKeyFast answers s differently from
// the parse, and reports whether it answered.
func checkHostKeyFast(t *testing.T, s string) bool {
	t.Helper()
	got, ok := hostKeyFast(s)
	if !ok {
		return false
	}
	want, err := hostKeySlow(s)
	if err != nil || got != want {
		assert.Fail(t, fmt.Sprintf("hostKeyFast(%q) = %q; the parse gives %q, %v", s, got, want, err))
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		assert.Fail(t, fmt.Sprintf("hostKeyFast(%q) answered for a URL that is not http(s): %v", s, err))
		return true
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	assert.Equalf(t, path, RobotsPath(s), "RobotsPath(%q) (expected: what the parse gives)", s)
	assert.Equalf(t, u.Scheme+"://"+u.Host, Origin(s), "Origin(%q) (expected: what the parse gives)", s)
	return true
}

func TestHTTPHostKeyRefusesOtherSchemes(t *testing.T) {
	for _, s := range []string{"ftp://e.com/", "mailto:x@e.com", "javascript:alert(1)"} {
		_, err := HTTPHostKey(s)
		assert.True(t, errors.Is(err, ErrScheme), fmt.Sprint(s, ": ", err))
	}
	h, err := HTTPHostKey("HTTP://Example.com:81/")
	assert.True(t, err == nil, err)
	assert.Equal(t, "example.com", h)
}
