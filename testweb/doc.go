// Package testweb serves a deterministic synthetic web on loopback addresses,
// for tests, the demo and benchmarks.
//
// # Shape
//
// A web has Config.Hosts hosts; host i listens on 127.B.x.y where x.y encodes
// i+1 (127.10.0.1, 127.10.0.2, ...), all on one TCP port, so each host is a
// distinct host name for scope and politeness. Every host serves:
//
//   - /robots.txt: "User-agent: *", "Disallow: /private/" and, when
//     configured for that host, "Crawl-delay: N".
//   - / (page 0) and /p/1.html ... /p/<PagesPerHost-1>.html: HTML pages of
//     about PageBytes bytes. Each has LinksPerPage links: NavLinks navigation
//     links, the same hrefs on every page of the host (/, /private/secret-<i>.html
//     and a few /p/ pages), and content links. Page n links to pages 2n+1
//     and 2n+2, so every page is reachable from the root within about
//     log2(PagesPerHost) hops; the other content links go to pseudo-random
//     pages, some on other hosts when CrossHost is set. Hrefs mix
//     root-relative, relative ("p/5.html", "5.html", "../p/5.html", "./"),
//     absolute forms and #fragments, all resolving (RFC 3986) to the
//     canonical URLs of Pages().
//   - /private/...: 200 with a short body, so that a fetch that robots.txt
//     forbids is visible (see DisallowedHits).
//   - anything else: 404.
//
// Host 0 also serves, linked from its root (in addition to its LinksPerPage
// links): /redirect (301 to /p/1.html), /missing (404 with an HTML body),
// /data.bin (application/octet-stream, 4 KiB) and, with Calendar, a crawler
// trap: /calendar/2026/01, whose every month links to the next and the
// previous month, without end.
//
// # Assets
//
// With Config.Assets, every generated page (/ and /p/N.html) also embeds
// what a browser needs to render it, so that a crawler that fetches embeds
// can be checked, and its archive replayed:
//
//   - in its head, /assets/site.css, the CDN's /cdn/cdn.css, a <style>
//     block drawing /assets/bg-K.png and <script src="/assets/app.js">;
//   - at the top of its body, the CDN's /cdn/logo.png, a tag whose style
//     attribute draws /assets/tile.png, <img src="/assets/img-K.png"
//     srcset="... 1x, /assets/img-K@2x.png 2x">, and a <picture> of
//     /assets/pic-K.webp with /assets/pic-K.png as its <img>; host 0's root
//     also embeds the CDN's /cdn/widget.html with <object>.
//
// K is one of 8 variants per asset, drawn per page. site.css @imports
// base.css (relative) and refers to fonts/f.woff2 and /assets/hero.png,
// base.css to /assets/base.png. Images are valid PNG and WebP files; the
// font is a stand-in that a browser rejects in its console only.
//
// The CDN is one more loopback IP, after the hosts', on the same port; it
// is not a seed, so a crawl of the seeds sees it out of scope. It serves a
// robots.txt that allows everything, the logo, cdn.css (url(cdn-bg.png),
// relative) and cdn-bg.png, the widget (an HTML page embedding /cdn/w.png
// and linking to /cdn/secret.html with <a href>) and w.png, so its
// resources are 1 or 2 embeds away from a page. /cdn/secret.html, a
// navigational link off the scope, must never be fetched (OffLimits).
// Assets lists what a crawler with embeds must fetch; Pages is unchanged.
//
// # Determinism
//
// Bodies depend only on the config, the port (absolute links carry
// "IP:PORT") and the calls that change pages: two webs started with the
// same Config, Port included, and given the same calls serve the same
// bytes. Wall time never enters a body. Body returns the current bytes for
// byte-for-byte checks.
//
// # Validators and changes
//
// With Config.Validators, every generated page (/ and /p/N.html) carries a
// validator: a page with an even number a strong ETag, a hash of its body,
// one with an odd number a Last-Modified and no ETag. The hosts honour
// conditional GET and HEAD requests as RFC 9110 says: an If-None-Match that
// holds the page's ETag (or "*") answers 304 Not Modified with the ETag and
// no body; without an If-None-Match, an If-Modified-Since at or after the
// page's Last-Modified answers 304 with the Last-Modified; anything else
// the page. Validator says what a page carries now. robots.txt and every
// other resource carry no validator and answer conditional requests in
// full, as do pages without Validators.
//
// Every page has a version, 0 at Start, and the web a clock of its own
// (Now): 2026-01-01T00:00:00Z at Start, moved on only by Advance and by
// changes. Change(frac) makes a new version of a share frac of the pages,
// picked from a source seeded by the config, and ChangePages of given
// pages; each call first moves the clock on by a second, to a whole
// second. A changed page has the same links and one more paragraph,
// "Revision N" for version N, so its ETag changes too; its Last-Modified
// is the clock at the change, strictly later than any before it. Pages
// that did not change keep their bytes and validators. Changes work
// without Validators too: then only the bytes change.
//
// With Config.Duplicates = D, the first D pages other than roots in
// (host, page) order are also served at a second URL on their host,
// /dup/N.html, with the same bytes and validators (a change changes both);
// the page links to it, and its links that would resolve differently
// from /dup/ take the dot-segment form. SecondURLs maps each second URL to
// its page's URL; the second URLs are part of Pages.
//
// # Large file
//
// With Config.LargeBytes = N, host 0 also serves /large.bin (LargeURL):
// N bytes of 64-byte lines, a 16-digit line number and a fixed text,
// generated as they are sent, so that a web can serve gigabytes from a
// few KiB of memory. LargeDigest is its payload digest, computed by
// generating it again. No page links to it: a test seeds it.
//
// # Counting
//
// Every request is recorded on the server side at its start, before the
// response is written, keyed by "http://" + Host header + request URI,
// with the validators it carried (If-None-Match, If-Modified-Since) and
// the status it is answered, decided by then. Pages is the set a complete,
// polite crawl must fetch; Missing, Duplicates and DisallowedHits say how
// a crawl differed from it; Answered lists the URLs answered with a status
// (304 for the revisits of a recrawl) and Conditional which URLs were
// asked with a validator. In asset mode the CDN's requests are counted
// too, Assets is the set of embeds a crawl must fetch besides, and
// MissingAssets says which it missed.
//
// # Dead hosts
//
// StartDead serves a small live web (DeadConfig.LiveHosts hosts of
// PagesPerHost pages on 127.B.0.x) whose pages link to a host of every kind
// that fails: a name that does not resolve (dead.invalid), a port that
// refuses connections, a listener that accepts and never answers, an https
// URL to a listener that answers garbage, and a host whose robots.txt
// answers 503 (127.B.1.1 to 127.B.1.4). Live lists the pages a crawl must
// fetch, Dead the URLs it must report as failed with their reason, Scope the
// campaign scope that takes in the dead hosts; the live hosts count requests
// as above, the silent and TLS hosts their connections (Conns), the
// robots.txt-503 host its requests (DeadRequests).
//
// # Virtual hosts
//
// StartVirtual serves up to millions of hosts, hostN.sim, on one listener,
// told apart by the Host header: each a robots.txt and PagesPerHost small
// pages. Names resolve only through the web's Lookup, which a fetcher takes
// as its lookup hook (fetch.WithLookup); the address guard still checks the
// listener's IP. Counts says which pages were missed or fetched twice.
package testweb
