package testweb

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Fixed paths of host 0 and the calendar's first month.
const (
	pathRedirect  = "/redirect"
	pathMissing   = "/missing"
	pathDataBin   = "/data.bin"
	redirectTo    = "/p/1.html"
	calendarFirst = "/calendar/2026/01"
	dataBinSize   = 4096
)

// words pads pages; any fixed list will do, it only has to look like text.
var words = []string{
	"crawler", "frontier", "politeness", "harvest", "archive", "river",
	"lantern", "meadow", "copper", "signal", "ledger", "harbor", "orchard",
	"quiet", "rapid", "distant", "golden", "narrow", "gentle", "hollow",
	"the", "a", "of", "and", "to", "in", "is", "was", "for", "on", "with",
	"across", "beneath", "beyond", "through", "over", "under", "around",
	"measure", "gather", "wander", "follow", "record", "return", "carry",
	"stone", "thread", "window", "season", "engine", "market", "bridge",
}

// generate builds every body that does not depend on the request.
func (w *Web) generate() {
	c := w.cfg
	w.versions.init(&w.layout, w.renderPage)
	w.robots = make([][]byte, c.Hosts)
	for h := range c.Hosts {
		for n := range c.PagesPerHost {
			w.pages = append(w.pages, w.pageURL(h, n))
		}
		w.robots[h] = w.robotsTxt(h)
	}
	if !c.NoExtras {
		for _, p := range []string{pathRedirect, pathMissing, pathDataBin} {
			w.pages = append(w.pages, "http://"+w.addrs[0]+p)
		}
	}
	w.pages = append(w.pages, w.seconds...)
	r := rand.New(rand.NewPCG(0xda7a, 0xb1))
	w.dataBin = make([]byte, dataBinSize)
	for i := range w.dataBin {
		w.dataBin[i] = byte(r.Uint32())
	}
}

func (w *Web) robotsTxt(h int) []byte {
	var b bytes.Buffer
	b.WriteString("User-agent: *\nDisallow: /private/\n")
	if d, ok := w.cfg.CrawlDelay[h]; ok {
		b.WriteString("Crawl-delay: " + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "\n")
	}
	return b.Bytes()
}

type link struct{ href, text string }

// navLinks are root-relative so that one href means the same on every page.
func (w *Web) navLinks(h int) []link {
	nav := []link{{"/", "Home"}, {fmt.Sprintf("/private/secret-%d.html", h), "Members only"}}
	for j := range w.cfg.NavLinks - 2 {
		k := 1 + j%(w.cfg.PagesPerHost-1)
		nav = append(nav, link{pagePath(k), "Section " + strconv.Itoa(k)})
	}
	return nav
}

// contentLinks returns the page's links other than navigation: its two
// children in a binary tree over the pages (so every page is reachable),
// then pseudo-random pages, some on other hosts.
func (w *Web) contentLinks(h, n int, r *rand.Rand) []link {
	c := w.cfg
	count := c.LinksPerPage - c.NavLinks
	type target struct{ host, page int }
	var ts []target
	for _, k := range []int{2*n + 1, 2*n + 2} {
		if k < c.PagesPerHost && len(ts) < count {
			ts = append(ts, target{h, k})
		}
	}
	for len(ts) < count {
		if c.CrossHost && c.Hosts > 1 && r.IntN(8) == 0 {
			ts = append(ts, target{(h + 1 + r.IntN(c.Hosts-1)) % c.Hosts, r.IntN(c.PagesPerHost)})
		} else {
			ts = append(ts, target{h, r.IntN(c.PagesPerHost)})
		}
	}
	links := make([]link, 0, len(ts)+4)
	for _, t := range ts {
		links = append(links, link{w.href(h, n, t.host, t.page, r), phrase(r, 2)})
	}
	if h == 0 && n == 0 && !c.NoExtras {
		links = append(links,
			link{pathRedirect, "old address"},
			link{pathMissing[1:], "a page that is gone"},
			link{"http://" + w.addrs[0] + pathDataBin, "raw data"})
	}
	if h == 0 && n == 0 {
		if c.Calendar {
			links = append(links, link{calendarFirst, "calendar"})
		}
	}
	switch {
	case len(w.extraLinks) == 0:
	case n == 0:
		for _, u := range w.extraLinks {
			links = append(links, link{u, "elsewhere"})
		}
	default:
		links = append(links, link{w.extraLinks[(h*c.PagesPerHost+n)%len(w.extraLinks)], "elsewhere"})
	}
	r.Shuffle(len(links), func(i, j int) { links[i], links[j] = links[j], links[i] })
	return links
}

// href writes a link from page n of host h to page k of host th in one of
// the forms real sites use; every form resolves to pageURL(th, k).
func (w *Web) href(h, n, th, k int, r *rand.Rand) string {
	var s string
	if th != h {
		s = w.pageURL(th, k)
	} else {
		switch r.IntN(5) {
		case 0:
			s = pagePath(k)
		case 1:
			s = w.pageURL(h, k)
		case 2: // relative to the page's directory; at a second URL, whose
			// directory is /dup/, only the dot segments resolve the same
			s = relative(n, k, w.hasDup(h, n))
		default: // dot segments
			s = relative(n, k, true)
		}
	}
	if r.IntN(6) == 0 {
		s += "#section-" + strconv.Itoa(1+r.IntN(9))
	}
	return s
}

// relative is the path of page k relative to the directory of page n (the
// root for page 0, /p/ for the others); dots takes the way through dot
// segments ("./p/1.html", "../p/1.html", "/" for the root from the root).
func relative(n, k int, dots bool) string {
	fromRoot := n == 0
	switch {
	case k == 0 && fromRoot && dots:
		return "/"
	case k == 0 && fromRoot:
		return "./"
	case k == 0:
		return "../"
	}
	file := strconv.Itoa(k) + ".html"
	switch {
	case fromRoot && dots:
		return "./p/" + file
	case fromRoot:
		return "p/" + file
	case dots:
		return "../p/" + file
	}
	return file
}

func phrase(r *rand.Rand, n int) string {
	var b bytes.Buffer
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// page renders page n of host h at version v; its randomness is seeded by
// (h, n) alone, so that versions differ only in their last paragraphs.
func (w *Web) page(h, n int, nav []link, v int) []byte {
	r := rand.New(rand.NewPCG(uint64(h)+1, uint64(n)+1))
	title := fmt.Sprintf("Host %d, page %d: %s", h, n, phrase(r, 3))
	var b bytes.Buffer
	b.Grow(w.cfg.PageBytes + 1024)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n%s</head>\n<body>\n%s<nav>\n<ul>\n",
		title, w.headAssets(h, n), w.bodyAssets(h, n))
	for _, l := range nav {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", l.href, l.text)
	}
	fmt.Fprintf(&b, "</ul>\n</nav>\n<main>\n<h1>%s</h1>\n", title)
	links := w.contentLinks(h, n, r)
	const footer = "</main>\n<footer><p>Generated by drover testweb.</p></footer>\n</body>\n</html>\n"
	target := w.cfg.PageBytes - len(footer)
	linkBytes := 0
	for _, l := range links {
		linkBytes += len(l.href) + len(l.text) + len(` <a href=""></a>`)
	}
	for len(links) > 0 || b.Len() < target {
		inPara := min(len(links), 1+r.IntN(3))
		// Spread the text left after the links over the paragraphs they
		// still need (about two links each), so that pages stay near
		// PageBytes; a word with its space averages under 8 bytes.
		paras := max(1, (len(links)+1)/2)
		nw := min(25+r.IntN(40), max(4, (target-b.Len()-linkBytes)/(8*paras)))
		b.WriteString("<p>")
		for i := range nw {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
			// Place the paragraph's links at random word positions.
			if inPara > 0 && r.IntN(nw-i) < inPara {
				fmt.Fprintf(&b, " <a href=\"%s\">%s</a>", links[0].href, links[0].text)
				linkBytes -= len(links[0].href) + len(links[0].text) + len(` <a href=""></a>`)
				links = links[1:]
				inPara--
			}
		}
		b.WriteString(".</p>\n")
	}
	if w.hasDup(h, n) {
		fmt.Fprintf(&b, "<p>This page is also at <a href=\"%s\">its second address</a>.</p>\n", dupPath(n))
	}
	if v > 0 {
		fmt.Fprintf(&b, "<p class=\"revision\">Revision %d.</p>\n", v)
	}
	b.WriteString(footer)
	return b.Bytes()
}

// calendarPage renders a month of the trap: links to the previous and the
// next month, forever (up to year 9999).
func calendarPage(y, m int) []byte {
	t := time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Calendar %s</title>\n</head>\n<body>\n<h1>%s</h1>\n<ul>\n",
		t.Format("2006-01"), t.Format("January 2006"))
	if prev := t.AddDate(0, -1, 0); prev.Year() >= 1 {
		fmt.Fprintf(&b, "<li><a href=\"/calendar/%04d/%02d\">previous month</a></li>\n", prev.Year(), prev.Month())
	}
	if next := t.AddDate(0, 1, 0); next.Year() <= 9999 {
		fmt.Fprintf(&b, "<li><a href=\"/calendar/%04d/%02d\">next month</a></li>\n", next.Year(), next.Month())
	}
	b.WriteString("<li><a href=\"/\">Home</a></li>\n</ul>\n<p>No events this month.</p>\n</body>\n</html>\n")
	return b.Bytes()
}
