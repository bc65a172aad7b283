package sink

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/page"
)

const testBodyCap = 1 << 20

// testPages returns n pages covering the shapes a sink must keep
// byte-identical: HTML, a binary body (every byte value, NULs, invalid UTF-8),
// a gzip-encoded body, a body near the 1 MiB cap, an empty body and a
// permanent failure (Status 0, Err set).
func testPages(t testing.TB, n int) []*page.Page {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.UTC)
	pages := make([]*page.Page, n)
	for i := range pages {
		u := fmt.Sprintf("http://site%d.test/page/%d?q=%d", i%7, i, i*i)
		body := []byte(fmt.Sprintf("<html><body>page %d <a href=\"/x\">x</a></body></html>\n", i))
		ct, ce := "text/html; charset=utf-8", ""
		switch i % 50 {
		case 1: // binary
			body = make([]byte, 4096+i)
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
			body[0], body[1], body[2] = 0, 0xff, 0xfe
			ct = "application/octet-stream"
		case 2: // gzip-encoded, kept encoded
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, err := zw.Write(bytes.Repeat([]byte("compressible text "), 500+i))
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			body, ce = b.Bytes(), "gzip"
		case 3: // near the body cap
			body = make([]byte, testBodyCap-100)
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
			ct = "application/pdf"
		case 4:
			body = nil
		}
		p := &page.Page{
			URL:             u,
			Campaign:        "camp-1",
			Status:          200,
			StatusLine:      "HTTP/1.1 200 OK",
			Request:         []byte(fmt.Sprintf("GET /page/%d?q=%d HTTP/1.1\r\nHost: site%d.test\r\nUser-Agent: drover-test\r\n\r\n", i, i*i, i%7)),
			Body:            body,
			ContentType:     ct,
			ContentEncoding: ce,
			FetchedAt:       at.Add(time.Duration(i) * time.Millisecond),
			Depth:           i % 4,
			Parent:          fmt.Sprintf("http://site%d.test/", i%7),
			IP:              fmt.Sprintf("127.0.0.%d", 1+i%200),
			Truncated:       i%50 == 3,
		}
		hdr := fmt.Sprintf("Content-Type: %s\r\nContent-Length: %d\r\nX-Odd:  spaced\tvalue \r\n", ct, len(body))
		if ce != "" {
			hdr += "Content-Encoding: " + ce + "\r\n"
		}
		p.Header = []byte(hdr)
		if i%50 == 5 {
			p.Status, p.StatusLine, p.Header, p.Body, p.ContentType = 0, "", nil, nil, ""
			p.Err = "dial tcp 10.0.0.1:80: connect: connection refused"
		}
		pages[i] = p
	}
	return pages
}

// byURL indexes pages by URL.
func byURL(pages []*page.Page) map[string]*page.Page {
	m := make(map[string]*page.Page, len(pages))
	for _, p := range pages {
		m[p.URL] = p
	}
	return m
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
