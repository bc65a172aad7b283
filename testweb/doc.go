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
// Bodies depend only on the config and the port (absolute links carry
// "IP:PORT"): two webs started with the same Config, Port included, serve
// the same bytes. Body returns them for byte-for-byte checks.
//
// # Counting
//
// Every request is recorded on the server side at its start, before the
// response is written, keyed by "http://" + Host header + request URI.
// Pages is the set a complete, polite crawl must fetch; Missing, Duplicates
// and DisallowedHits say how a crawl differed from it. In asset mode the
// CDN's requests are counted too, Assets is the set of embeds a crawl must
// fetch besides, and MissingAssets says which it missed.
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
