package testweb

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	contentHTML = "text/html; charset=utf-8"
	privatePath = "/private/"
)

var (
	missingBody  = []byte("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>404 Not Found</title>\n</head>\n<body>\n<h1>Not Found</h1>\n<p>This page is missing on purpose.</p>\n</body>\n</html>\n")
	redirectBody = []byte("<a href=\"" + redirectTo + "\">Moved Permanently</a>.\n")
	privateBody  = []byte("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Private</title>\n</head>\n<body>\n<p>robots.txt disallows /private/: a polite crawler never sees this.</p>\n</body>\n</html>\n")
	notFoundBody = []byte("404 page not found\n")
)

// response is what a host answers for a path. known is false for the
// generic 404 of paths the web does not define. page is the state of a
// generated page, nil for every other resource.
type response struct {
	status   int
	ctype    string
	location string
	body     []byte
	page     *pageState
	known    bool
	// large is the size of a generated large file, sent in place of body.
	large int64
}

// route answers path on host h; it never writes, so it serves Body too.
func (w *Web) route(h int, path string) response {
	if h == w.cfg.Hosts {
		return w.routeCDN(path)
	}
	switch {
	case path == "/robots.txt":
		return response{status: http.StatusOK, ctype: "text/plain; charset=utf-8", body: w.robots[h], known: true}
	case path == "/":
		return w.htmlPage(h, 0)
	case strings.HasPrefix(path, "/p/") && strings.HasSuffix(path, ".html"):
		if n, ok := pageNumber(path[len("/p/") : len(path)-len(".html")]); ok && n < w.cfg.PagesPerHost {
			return w.htmlPage(h, n)
		}
	case w.cfg.Duplicates > 0 && strings.HasPrefix(path, dupPrefix) && strings.HasSuffix(path, ".html"):
		if n, ok := pageNumber(path[len(dupPrefix) : len(path)-len(".html")]); ok && n < w.cfg.PagesPerHost && w.hasDup(h, n) {
			return w.htmlPage(h, n)
		}
	case strings.HasPrefix(path, privatePath):
		return response{status: http.StatusOK, ctype: contentHTML, body: privateBody, known: true}
	case w.cfg.Assets && strings.HasPrefix(path, "/assets/"):
		if res, ok := w.routeAsset(path); ok {
			return res
		}
	case h != 0:
	case path == pathLarge && w.cfg.LargeBytes > 0:
		return response{status: http.StatusOK, ctype: "application/octet-stream", large: w.cfg.LargeBytes, known: true}
	case path == pathRedirect && !w.cfg.NoExtras:
		return response{status: http.StatusMovedPermanently, ctype: contentHTML, location: redirectTo, body: redirectBody, known: true}
	case path == pathMissing && !w.cfg.NoExtras:
		return response{status: http.StatusNotFound, ctype: contentHTML, body: missingBody, known: true}
	case path == pathDataBin && !w.cfg.NoExtras:
		return response{status: http.StatusOK, ctype: "application/octet-stream", body: w.dataBin, known: true}
	case w.cfg.Calendar && strings.HasPrefix(path, "/calendar/"):
		if y, m, ok := calendarMonth(path[len("/calendar/"):]); ok {
			return response{status: http.StatusOK, ctype: contentHTML, body: calendarPage(y, m), known: true}
		}
	}
	return response{status: http.StatusNotFound, ctype: "text/plain; charset=utf-8", body: notFoundBody}
}

// htmlPage answers page n of host h at its current version.
func (w *Web) htmlPage(h, n int) response {
	p := w.current(h, n)
	return response{status: http.StatusOK, ctype: contentHTML, body: p.body, page: p, known: true}
}

// pageNumber accepts only the canonical decimal form, so that each page has
// exactly one URL ("/p/01.html" is a 404).
func pageNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// calendarMonth parses "YYYY/MM" in its canonical form.
func calendarMonth(s string) (y, m int, ok bool) {
	ys, ms, found := strings.Cut(s, "/")
	if !found || len(ys) != 4 || len(ms) != 2 {
		return 0, 0, false
	}
	y, err1 := strconv.Atoi(ys)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || y < 1 || m < 1 || m > 12 || ys[0] == '+' || ms[0] == '+' {
		return 0, 0, false
	}
	return y, m, true
}

func (w *Web) handler(h int) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		res := w.route(h, r.URL.Path)
		if w.cfg.Validators && res.page != nil {
			res = notModified(r, res)
		}
		// Recorded before the response is written, so that request starts
		// can be checked against politeness delays; the status is decided
		// by then.
		w.record(Request{
			URL:             "http://" + r.Host + r.URL.RequestURI(),
			Host:            r.Host,
			UA:              r.UserAgent(),
			Start:           start,
			IfNoneMatch:     strings.Join(r.Header["If-None-Match"], ", "),
			IfModifiedSince: firstValue(r.Header["If-Modified-Since"]),
			Status:          res.status,
		})
		writeHead(rw, res)
		switch {
		case r.Method == http.MethodHead || res.status == http.StatusNotModified:
		case res.large > 0:
			writeLarge(rw, res.large)
		default:
			w.writeBody(rw, r, res)
		}
	})
}

// firstValue is the first of a header's values, "" for none; indexing the
// header with its canonical name spares Get's canonicalization.
func firstValue(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// writeHead writes the status and the header of res. A 304 carries the
// page's validator and no Content-Type or Content-Length.
func writeHead(rw http.ResponseWriter, res response) {
	hdr := rw.Header()
	if res.status != http.StatusNotModified {
		hdr.Set("Content-Type", res.ctype)
		hdr.Set("Content-Length", strconv.FormatInt(max(int64(len(res.body)), res.large), 10))
	}
	if res.location != "" {
		hdr.Set("Location", res.location)
	}
	if p := res.page; p != nil {
		if p.etag != "" {
			hdr.Set("ETag", p.etag)
		}
		if p.lastMod != "" {
			hdr.Set("Last-Modified", p.lastMod)
		}
	}
	rw.WriteHeader(res.status)
}

// Body returns a copy of the bytes the server sends for rawURL now (for a
// changed page, its current version), and false when rawURL is not on this
// web or its path is not one the web defines (a generic 404). It covers
// pages, robots.txt, the redirect's body, the 404 page, /private/ pages
// and, when enabled, second URLs, calendar pages, assets and the CDN's
// resources. The large file is not covered (LargeDigest tells it).
func (w *Web) Body(rawURL string) ([]byte, bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" {
		return nil, false
	}
	h, ok := w.hostIdx[u.Host]
	if !ok {
		return nil, false
	}
	res := w.route(h, u.Path)
	if !res.known || res.large > 0 {
		return nil, false
	}
	return append([]byte(nil), res.body...), true
}

// Disallowed reports whether robots.txt forbids rawURL: its path is under
// /private/.
func (w *Web) Disallowed(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && strings.HasPrefix(u.Path, privatePath)
}
