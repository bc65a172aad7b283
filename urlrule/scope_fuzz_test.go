package urlrule

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
)

// FuzzAllowNormalMatchesAllow holds Scope.AllowNormal of a normalized URL
// to Scope.Allow of that URL parsed, the way the worker checked links
// before it took normalized strings, for scopes by seed host and by regex, at depths around
// the limits and the generated-space guard. It also holds Normalize to
// returning only what url.Parse accepts.
func FuzzAllowNormalMatchesAllow(f *testing.F) {
	for i, s := range append(fuzzSeeds,
		"http://example.com/x/x/x", "/a/b/a/b/a/b", "http://[::1]:8080/p/1",
		"http://example.com/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/20/21",
		"/cal/2024/05?d=12", "http://WWW.example.com/private/doc.pdf") {
		f.Add(s, uint8(i), uint8(i))
	}
	scopes := []*Scope{
		mustScope(f, campaign.Config{
			Seeds:    []string{"http://example.com/", "https://www.example.com/", "http://a/", "http://[::1]/", "http://xn--bcher-kva.example/"},
			Exclude:  []string{`/private/`, `\.pdf$`},
			MaxDepth: new(3),
		}),
		mustScope(f, campaign.Config{
			Seeds: []string{"http://example.com/"},
			Scope: []string{`^https?://([a-z]+\.)?example\.(org|com)/`, `\?`},
		}),
	}
	parent, _ := url.Parse(benchBase + "?page=7")
	f.Fuzz(func(t *testing.T, raw string, baseIdx, depthIdx uint8) {
		var base *url.URL
		if b := fuzzBases[int(baseIdx)%len(fuzzBases)]; b != "" {
			base, _ = url.Parse(b)
		}
		n, err := Normalize(raw, base, nil)
		if err != nil {
			return
		}
		u, err := url.Parse(n)
		require.NoError(t, err, "Normalize(%q) = %q, which url.Parse refuses", raw, n)
		depth := []int{0, 1, 3, 4, MaxPatternDepth + 1}[int(depthIdx)%5]
		for i, s := range scopes {
			for _, p := range []*url.URL{nil, parent, u} {
				ok, reason := s.Allow(u, depth, p)
				nok, nreason := s.AllowNormal(n, depth, p)
				if ok != nok || reason != nreason {
					require.FailNow(t, fmt.Sprintf("scope %d, %q at depth %d: AllowNormal %v %q, Allow %v %q", i, n, depth, nok, nreason, ok, reason))
				}
			}
		}
	})
}
