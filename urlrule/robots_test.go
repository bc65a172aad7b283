package urlrule

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// robotsCase is one robots.txt, one agent, one URL and the expected answer.
// Most come from Google's reference test suite (github.com/google/robotstxt,
// robots_test.cc), rewritten as fixtures; the rest from RFC 9309.
type robotsCase struct {
	name    string
	robots  string
	agent   string
	url     string
	allowed bool
}

const (
	googleGroups = "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n"
	googleGlobal = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
	rfcExample   = "User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\nUser-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\nUser-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\nUser-Agent: quxbot\n"
)

var robotsCases = []robotsCase{
	// Google: ID_LineSyntax_Line.
	{"line correct", "user-agent: FooBot\ndisallow: /\n", "FooBot", "http://foo.bar/x/y", false},
	{"line unknown keys", "foo: FooBot\nbar: /\n", "FooBot", "http://foo.bar/x/y", true},
	{"line missing colon accepted", "user-agent FooBot\ndisallow /\n", "FooBot", "http://foo.bar/x/y", false},
	// Google: ID_LineSyntax_Groups.
	{"groups foo x", googleGroups, "FooBot", "http://foo.bar/x/b", true},
	{"groups foo z merged", googleGroups, "FooBot", "http://foo.bar/z/d", true},
	{"groups foo y", googleGroups, "FooBot", "http://foo.bar/y/c", false},
	{"groups bar y", googleGroups, "BarBot", "http://foo.bar/y/c", true},
	{"groups bar w", googleGroups, "BarBot", "http://foo.bar/w/a", true},
	{"groups bar z", googleGroups, "BarBot", "http://foo.bar/z/d", false},
	{"groups baz z", googleGroups, "BazBot", "http://foo.bar/z/d", true},
	{"rule outside group ignored foo", googleGroups, "FooBot", "http://foo.bar/foo/bar/", false},
	{"rule outside group ignored bar", googleGroups, "BarBot", "http://foo.bar/foo/bar/", false},
	// Google: ID_REPLineNamesCaseInsensitive, ID_UserAgentValueCaseInsensitive.
	{"keys upper", "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n", "FooBot", "http://foo.bar/x/y", true},
	{"keys camel", "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n", "FooBot", "http://foo.bar/a/b", false},
	{"agent value upper", "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n", "foo", "http://foo.bar/x/y", true},
	{"agent value camel", "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n", "Foo", "http://foo.bar/a/b", false},
	// Google: GoogleOnly_AcceptUserAgentUpToFirstSpace.
	{"agent up to first space", "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n", "Foo", "http://foo.bar/x/y", true},
	// Google: ID_GlobalGroups_Secondary.
	{"empty file", "", "FooBot", "http://foo.bar/x/y", true},
	{"specific beats global", googleGlobal, "FooBot", "http://foo.bar/x/y", false},
	{"global for others", googleGlobal, "BarBot", "http://foo.bar/x/y", true},
	{"no matching group", "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n", "QuxBot", "http://foo.bar/x/y", true},
	// Google: ID_AllowDisallow_Value_CaseSensitive.
	{"path case lower", "user-agent: FooBot\ndisallow: /x/\n", "FooBot", "http://foo.bar/x/y", false},
	{"path case upper", "user-agent: FooBot\ndisallow: /X/\n", "FooBot", "http://foo.bar/x/y", true},
	// Google: ID_LongestMatch.
	{"longest disallow", "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n", "FooBot", "http://foo.bar/x/page.html", false},
	{"longest allow", "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n", "FooBot", "http://foo.bar/x/page.html", true},
	{"longest allow dir", "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n", "FooBot", "http://foo.bar/x/", false},
	{"empty rules", "user-agent: FooBot\ndisallow: \nallow: \n", "FooBot", "http://foo.bar/x/page.html", true},
	{"tie allow wins root", "user-agent: FooBot\ndisallow: /\nallow: /\n", "FooBot", "http://foo.bar/x/page.html", true},
	{"x vs x/ a", "user-agent: FooBot\ndisallow: /x\nallow: /x/\n", "FooBot", "http://foo.bar/x", false},
	{"x vs x/ b", "user-agent: FooBot\ndisallow: /x\nallow: /x/\n", "FooBot", "http://foo.bar/x/", true},
	{"tie allow wins page", "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n", "FooBot", "http://foo.bar/x/page.html", true},
	{"wildcard longer", "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n", "FooBot", "http://foo.bar/page.html", false},
	{"wildcard no match", "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n", "FooBot", "http://foo.bar/page", true},
	{"allow prefix longer", "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n", "FooBot", "http://foo.bar/x/page.html", true},
	{"wildcard elsewhere", "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n", "FooBot", "http://foo.bar/x/y.html", false},
	{"specific group implicit allow", "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n", "FooBot", "http://foo.bar/x/page", true},
	{"specific group disallow", "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n", "FooBot", "http://foo.bar/y/page", false},
	// Google: ID_Encoding.
	{"query with url", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n", "FooBot", "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par", true},
	{"utf8 rule encoded", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n", "FooBot", "http://foo.bar/foo/bar/%E3%83%84", true},
	{"encoded rule", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n", "FooBot", "http://foo.bar/foo/bar/%E3%83%84", true},
	{"unreserved encoded rule vs plain", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n", "FooBot", "http://foo.bar/foo/bar/baz", false},
	{"unreserved encoded rule vs encoded", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n", "FooBot", "http://foo.bar/foo/bar/%62%61%7A", true},
	// Google: ID_SpecialCharacters.
	{"star mid no match", "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "FooBot", "http://foo.bar/foo/bar/quz", false},
	{"star mid other", "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "FooBot", "http://foo.bar/foo/quz", true},
	{"star mid double slash", "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "FooBot", "http://foo.bar/foo//quz", true},
	{"dollar exact", "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n", "FooBot", "http://foo.bar/foo/bar", false},
	{"dollar longer path", "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n", "FooBot", "http://foo.bar/foo/bar/", true},
	{"comment hash", "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n", "FooBot", "http://foo.bar/foo/bar", true},
	{"comment cuts value", "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n", "FooBot", "http://foo.bar/foo/quz", false},
	// Google: GoogleOnly_DocumentationChecks.
	{"doc fish bar", "user-agent: FooBot\ndisallow: /\nallow: /fish\n", "FooBot", "http://foo.bar/bar", false},
	{"doc fish heads", "user-agent: FooBot\ndisallow: /\nallow: /fish\n", "FooBot", "http://foo.bar/fishheads/yummy.html", true},
	{"doc fish query", "user-agent: FooBot\ndisallow: /\nallow: /fish\n", "FooBot", "http://foo.bar/fish.html?id=anything", true},
	{"doc fish case", "user-agent: FooBot\ndisallow: /\nallow: /fish\n", "FooBot", "http://foo.bar/Fish.asp", false},
	{"doc catfish", "user-agent: FooBot\ndisallow: /\nallow: /fish\n", "FooBot", "http://foo.bar/catfish", false},
	{"doc query fish", "user-agent: FooBot\ndisallow: /\nallow: /fish\n", "FooBot", "http://foo.bar/?id=fish", false},
	{"doc fish star", "user-agent: FooBot\ndisallow: /\nallow: /fish*\n", "FooBot", "http://foo.bar/fish/salmon.html", true},
	{"doc fish slash", "user-agent: FooBot\ndisallow: /\nallow: /fish/\n", "FooBot", "http://foo.bar/fish", false},
	{"doc php", "user-agent: FooBot\ndisallow: /\nallow: /*.php\n", "FooBot", "http://foo.bar//folder/any.php.file.html", true},
	{"doc php query", "user-agent: FooBot\ndisallow: /\nallow: /*.php\n", "FooBot", "http://foo.bar/index?f=filename.php/", true},
	{"doc php dir", "user-agent: FooBot\ndisallow: /\nallow: /*.php\n", "FooBot", "http://foo.bar/php/", false},
	{"doc php upper", "user-agent: FooBot\ndisallow: /\nallow: /*.php\n", "FooBot", "http://foo.bar/windows.PHP", false},
	{"doc php$", "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n", "FooBot", "http://foo.bar/folder/filename.php", true},
	{"doc php$ query", "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n", "FooBot", "http://foo.bar/filename.php?parameters", false},
	{"doc php$ 5", "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n", "FooBot", "http://foo.bar/filename.php5", false},
	{"doc fish*.php", "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n", "FooBot", "http://foo.bar/fishheads/catfish.php?parameters", true},
	{"doc fish*.php anchored", "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n", "FooBot", "http://foo.bar/a/fish.php", false},
	{"doc fish*.php case", "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n", "FooBot", "http://foo.bar/Fish.PHP", false},
	{"precedence p", "user-agent: FooBot\nallow: /p\ndisallow: /\n", "FooBot", "http://example.com/page", true},
	{"precedence folder", "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n", "FooBot", "http://example.com/folder/page", true},
	{"precedence htm", "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n", "FooBot", "http://example.com/page.htm", false},
	{"precedence root$", "user-agent: FooBot\nallow: /$\ndisallow: /\n", "FooBot", "http://example.com/", true},
	{"precedence root$ page", "user-agent: FooBot\nallow: /$\ndisallow: /\n", "FooBot", "http://example.com/page.html", false},
	// Google: line endings and BOM.
	{"mac line ends", "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r", "bar", "http://foo.bar/x", false},
	{"dos line ends", "User-Agent: foo\r\nDisallow: /some/path\r\n", "foo", "http://foo.bar/some/path", false},
	{"no final newline", "User-Agent: foo\nDisallow: /", "foo", "http://foo.bar/x", false},
	{"bom", "\xEF\xBB\xBFUser-Agent: foo\nDisallow: /AnyValue\n", "foo", "http://foo.bar/AnyValue", false},
	{"partial bom", "\xEF\xBBUser-Agent: foo\nDisallow: /AnyValue\n", "foo", "http://foo.bar/AnyValue", false},
	{"broken bom", "\xEF\x11\xBFUser-Agent: foo\nDisallow: /AnyValue\n", "foo", "http://foo.bar/AnyValue", true},
	// RFC 9309 section 5.1.
	{"rfc star gif", rfcExample, "drover", "http://example.com/a/b.gif", false},
	{"rfc star example", rfcExample, "drover", "http://example.com/example/x", false},
	{"rfc star publications", rfcExample, "drover", "http://example.com/publications/x", true},
	{"rfc foobot page", rfcExample, "foobot", "http://example.com/example/page.html", true},
	{"rfc foobot gif", rfcExample, "foobot", "http://example.com/example/allowed.gif", true},
	{"rfc foobot other", rfcExample, "foobot", "http://example.com/x", false},
	{"rfc barbot", rfcExample, "barbot", "http://example.com/example/page.html", false},
	{"rfc bazbot", rfcExample, "bazbot", "http://example.com/example/page.html", false},
	{"rfc bazbot gif", rfcExample, "bazbot", "http://example.com/a.gif", true},
	{"rfc quxbot empty group", rfcExample, "quxbot", "http://example.com/a.gif", true},
	// RFC 9309 section 5.2.
	{"rfc longest allow", "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n", "foobot", "http://example.com/example/page/x", true},
	{"rfc longest disallow", "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n", "foobot", "http://example.com/example/page/disallowed.gif", false},
	// Drover's own choices.
	{"robots.txt always allowed", "user-agent: *\ndisallow: /\n", "drover", "/robots.txt", true},
	{"exact agent, not prefix", "user-agent: d\ndisallow: /\n", "drover", "/x", true},
	{"misspelled disallow", "user-agent: *\ndissallow: /x\n", "drover", "/x/y", false},
	{"rule before any agent ignored", "disallow: /\nuser-agent: *\ndisallow: /x\n", "drover", "/y", true},
	{"sitemap does not end agent run", "user-agent: a\nsitemap: http://e.com/s.xml\nuser-agent: drover\ndisallow: /\n", "a", "/x", false},
}

func TestRobotsCases(t *testing.T) {
	for _, c := range robotsCases {
		t.Run(c.name, func(t *testing.T) {
			r := parseRobotsBody([]byte(c.robots), c.agent)
			assert.Equal(t, c.allowed, r.Allowed(c.url), "robots.txt:\n"+c.robots)
		})
	}
}

// TestRobotsLineTooLong is Google's GoogleOnly_LineTooLong: a rule longer
// than 8 × 2083 bytes is cut there.
func TestRobotsLineTooLong(t *testing.T) {
	long := "/x/" + strings.Repeat("a", maxRobotsLine)
	r := parseRobotsBody([]byte("user-agent: FooBot\ndisallow: "+long+"/qux\n"), "foobot")
	assert.True(t, r.Allowed("/fux"))
	assert.True(t, !r.Allowed(long+"/fux"))
}

func TestParseRobotsStatus(t *testing.T) {
	body := []byte("user-agent: *\ndisallow: /private\n")
	cases := []struct {
		status      int
		err         error
		allowed     bool
		unreachable bool
	}{
		{200, nil, true, false},
		{301, nil, true, false}, // redirects exhausted: no robots.txt
		{404, nil, true, false},
		{403, nil, true, false},
		{429, nil, false, true},
		{500, nil, false, true},
		{503, nil, false, true},
		{0, errors.New("connection refused"), false, true},
	}
	for _, c := range cases {
		r := ParseRobots(c.status, body, c.err)
		assert.Equal(t, c.allowed, r.Allowed("/public"), fmt.Sprint("status ", c.status))
		assert.Equal(t, c.unreachable, r.Unreachable, fmt.Sprint("status ", c.status))
		assert.True(t, r.Allowed("/robots.txt"))
	}
	assert.True(t, !ParseRobots(200, body, nil).Allowed("/private/x"))
}

func TestRobotsCrawlDelayAndSitemaps(t *testing.T) {
	body := "Sitemap: https://example.com/s1.xml\n" +
		"user-agent: *\ncrawl-delay: 2\ndisallow: /a\n" +
		"user-agent: drover\ncrawl-delay: 1.5\ndisallow: /b\n" +
		"user-agent: other\ncrawl-delay: 99\n" +
		"sitemap: https://example.com/s2.xml\nsitemap: https://example.com/s1.xml\nsitemap: /relative.xml\n"
	r := ParseRobots(200, []byte(body), nil)
	assert.Equal(t, 1500*time.Millisecond, r.CrawlDelay())
	assert.Equal(t, []string{"https://example.com/s1.xml", "https://example.com/s2.xml"}, r.Sitemaps())
	assert.True(t, r.Allowed("/a"), "the drover group replaces *")
	assert.True(t, !r.Allowed("/b"))

	r = ParseRobots(200, []byte("user-agent: *\ncrawl-delay: -1\ncrawl-delay: NaN\ncrawl-delay: 1e300\n"), nil)
	assert.Equal(t, maxCrawlDelay, r.CrawlDelay())
}

func TestRobotsGarbage(t *testing.T) {
	garbage := []string{
		"\x00\x01\x02\xff\xfe binary \x89PNG\r\n\x1a\n",
		"<html><body>Not a robots file</body></html>",
		strings.Repeat("user-agent: *\ndisallow: /*a*a*a*a*a*a*a*a*\n", 1000),
		"user-agent: *\ncrawl-delay: lots\nallow\n:::\n disallow : /x \n",
		strings.Repeat("*", 100000),
	}
	for _, g := range garbage {
		r := ParseRobots(200, []byte(g), nil)
		require.True(t, r != nil)
		r.Allowed("/" + strings.Repeat("a", 3000))
		r.Allowed("/x")
	}
	r := ParseRobots(200, []byte(garbage[3]), nil)
	assert.True(t, !r.Allowed("/x/1"), "a good line survives garbage around it")
}
