package replay

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// hopByHop are the header fields that describe one connection, not the
// response (RFC 9110, section 7.6.1), and Content-Length, which the
// handler sets from the archived body (chunked coding already removed).
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Content-Length",
}

// Handler returns an HTTP forward proxy that answers from the archive: a
// browser started with --proxy-server pointing at it sends absolute URLs,
// and gets the archived status, header (but the hop-by-hop fields, and
// Content-Length set to the archived body's length) and body. A URL not in
// the archive gets 404 with a body that says so. A request in origin form
// (a client that took the proxy for the origin) is looked up by its Host
// header over http. CONNECT is refused: the archive is replayed over plain
// http. Every request is recorded in Served or Misses.
func (a *Archive) Handler() http.Handler {
	return http.HandlerFunc(a.serve)
}

func (a *Archive) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		a.note(r.Host, false)
		http.Error(w, "replay: CONNECT "+r.Host+" refused: the archive is replayed over plain http only", http.StatusMethodNotAllowed)
		return
	}
	u := *r.URL
	if u.Host == "" {
		u.Host = r.Host
	}
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	target := u.String()
	res, ok := a.Lookup(target)
	a.note(target, ok)
	if !ok {
		http.Error(w, "replay: "+target+" is not in the archive", http.StatusNotFound)
		return
	}
	h := w.Header()
	for name, vs := range res.Header {
		h[name] = vs
	}
	for _, name := range connectionFields(res.Header) {
		h.Del(name)
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
	noBody := res.Status == http.StatusNoContent || res.Status == http.StatusNotModified
	if !noBody {
		h.Set("Content-Length", strconv.Itoa(len(res.Body)))
	}
	w.WriteHeader(res.Status)
	if r.Method != http.MethodHead && !noBody {
		_, _ = w.Write(res.Body) // the browser went away: nothing to do
	}
}

// connectionFields are the fields that the Connection header names as
// hop-by-hop.
func connectionFields(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, textproto.CanonicalMIMEHeaderKey(f))
			}
		}
	}
	return out
}

// describe is a status line's text for a report: "404 Not Found".
func describe(status int) string {
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}
