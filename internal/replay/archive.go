// Package replay plays a crawl's WARC files back to a browser, as test
// support: Open indexes the archived responses, Handler serves them as an
// HTTP forward proxy, and LoadPages loads pages in headless Chromium
// through that proxy and reports every subrequest that failed. A page
// whose report is clean replays from the archive alone.
package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nlnwa/gowarc"
)

// Response is one archived HTTP response.
type Response struct {
	// URI is the record's WARC-Target-URI.
	URI string
	// Status is the status code of the archived status line.
	Status int
	// Header is the archived header, as the server sent it.
	Header http.Header
	// Body is the archived body: without chunked transfer coding, with any
	// content coding the server applied (drover stores bodies as sent),
	// cut short when the record says WARC-Truncated.
	Body []byte
}

// Archive holds the responses of a directory's WARC files by target URI.
// Bodies are held in memory: it is meant for the small archives of tests.
// Its methods are safe for concurrent use.
type Archive struct {
	byURI map[string]*Response // by key(URI)

	mu     sync.Mutex
	served []string
	misses []string
}

// revisit is a revisit record waiting for the response it refers to.
type revisit struct {
	uri, refersTo string
	head          *Response // the revisit's own status and header; nil when its block has none
}

// Open reads every WARC file of dir (*.warc and *.warc.gz, in name order)
// and indexes its response records by target URI: of several responses for
// one URI it keeps the first with a 2xx or 3xx status, or else the first.
// A revisit record for a URI with no such response serves the response
// its WARC-Refers-To-Target-URI names, under the revisit's own status and
// header when its block has them, unless that status is 304 (a
// server-not-modified revisit serves its capture as it was). It fails when dir holds no WARC file or
// a file does not read as WARC.
func Open(dir string) (*Archive, error) {
	var files []string
	for _, pattern := range []string{"*.warc", "*.warc.gz"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, fmt.Errorf("replay: listing %s: %w", dir, err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("replay: no *.warc or *.warc.gz file in %s", dir)
	}
	slices.Sort(files)
	a := &Archive{byURI: map[string]*Response{}}
	var revisits []revisit
	for _, f := range files {
		rv, err := a.readFile(f)
		if err != nil {
			return nil, err
		}
		revisits = append(revisits, rv...)
	}
	for _, rv := range revisits {
		if old := a.byURI[key(rv.uri)]; old != nil && goodStatus(old.Status) {
			continue
		}
		ref := a.byURI[key(rv.refersTo)]
		if ref == nil {
			continue
		}
		res := &Response{URI: rv.uri, Status: ref.Status, Header: ref.Header, Body: ref.Body}
		// A 304's head (a server-not-modified revisit) stands for the
		// capture it refers to: the browser gets that capture whole.
		if rv.head != nil && rv.head.Status != http.StatusNotModified {
			res.Status, res.Header = rv.head.Status, rv.head.Header
		}
		a.byURI[key(rv.uri)] = res
	}
	return a, nil
}

// readFile indexes file's responses and returns its revisits.
func (a *Archive) readFile(file string) ([]revisit, error) {
	r, err := gowarc.NewWarcFileReader(file, 0, gowarc.WithNoValidation())
	if err != nil {
		return nil, fmt.Errorf("replay: opening %s: %w", file, err)
	}
	defer r.Close()
	var revisits []revisit
	for n := 0; ; n++ {
		rec, _, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return revisits, nil
		}
		if err != nil {
			return nil, fmt.Errorf("replay: %s record %d: %w", file, n, err)
		}
		if rec.Type() != gowarc.Response && rec.Type() != gowarc.Revisit {
			continue
		}
		h := rec.WarcHeader()
		uri := trimAngles(h.Get(gowarc.WarcTargetURI))
		block, err := readBlock(rec)
		if err != nil {
			return nil, fmt.Errorf("replay: %s record %d (%s): %w", file, n, uri, err)
		}
		res, ok := parseHTTP(uri, block)
		if rec.Type() == gowarc.Revisit {
			rv := revisit{uri: uri, refersTo: trimAngles(h.Get(gowarc.WarcRefersToTargetURI))}
			if ok {
				rv.head = res
			}
			revisits = append(revisits, rv)
			continue
		}
		if !ok {
			continue // not an HTTP response a browser could be given
		}
		if old := a.byURI[key(uri)]; old == nil || !goodStatus(old.Status) && goodStatus(res.Status) {
			a.byURI[key(uri)] = res
		}
	}
}

func readBlock(rec gowarc.WarcRecord) ([]byte, error) {
	raw, err := rec.Block().RawBytes()
	if err != nil {
		return nil, err
	}
	return io.ReadAll(raw)
}

// goodStatus is a status worth replaying over another: 2xx or 3xx.
func goodStatus(s int) bool { return s >= 200 && s < 400 }

// parseHTTP splits a response block into status line, header and body.
// It is lenient with the header, which holds what a server sent: lines
// without a colon are skipped. A block without a final status (2xx to 5xx)
// is not a response.
func parseHTTP(uri string, block []byte) (*Response, bool) {
	head, body, ok := bytes.Cut(block, []byte("\r\n\r\n"))
	if !ok {
		if head, body, ok = bytes.Cut(block, []byte("\n\n")); !ok {
			head, body = block, nil // a header with no body
		}
	}
	lines := strings.Split(strings.ReplaceAll(string(head), "\r\n", "\n"), "\n")
	proto, rest, _ := strings.Cut(lines[0], " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/") || err != nil || status < 200 || status > 599 {
		return nil, false
	}
	h := http.Header{}
	var last string
	for _, l := range lines[1:] {
		if (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) && last != "" {
			vs := h[last]
			vs[len(vs)-1] += " " + strings.TrimSpace(l) // an obsolete folded line
			continue
		}
		name, value, found := strings.Cut(l, ":")
		if !found || strings.TrimSpace(name) == "" {
			continue
		}
		last = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
		h.Add(last, strings.TrimSpace(value))
	}
	return &Response{URI: uri, Status: status, Header: h, Body: body}, true
}

// trimAngles drops the angle brackets some WARC 1.0 writers put around URIs.
func trimAngles(s string) string {
	if strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
		return s[1 : len(s)-1]
	}
	return s
}

// key normalizes a URL so that a browser's request matches the target URI
// the crawler recorded: scheme and host in lower case, no default port,
// "/" for an empty path, no fragment.
func key(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return raw
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if port := u.Port(); port == "80" && u.Scheme == "http" || port == "443" && u.Scheme == "https" {
		u.Host = strings.TrimSuffix(u.Host, ":"+port)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Lookup returns the archived response for rawURL.
func (a *Archive) Lookup(rawURL string) (*Response, bool) {
	res, ok := a.byURI[key(rawURL)]
	return res, ok
}

// URIs returns the target URI of every archived response, sorted.
func (a *Archive) URIs() []string {
	out := make([]string, 0, len(a.byURI))
	for _, res := range a.byURI {
		out = append(out, res.URI)
	}
	slices.Sort(out)
	return out
}

// Served returns the URL of every request the handler answered from the
// archive, in arrival order.
func (a *Archive) Served() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.served)
}

// Misses returns the URL of every request for a URL not in the archive, in
// arrival order, but for a site's /favicon.ico when the archive lacks it:
// the browser asks for that on its own, for the tab's icon, at any time
// around a page's load and past the tab's blocked URLs, and no page of a
// test web links it.
func (a *Archive) Misses() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.misses)
}

func (a *Archive) note(u string, found bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case found:
		a.served = append(a.served, u)
	case browserIcon(u):
	default:
		a.misses = append(a.misses, u)
	}
}

// browserIcon reports whether u is a site's /favicon.ico.
func browserIcon(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Path == "/favicon.ico"
}
