package fetch

import (
	"bytes"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// rawCap bounds how many bytes of a request and of a response head are
// recorded; it is also the transport's MaxResponseHeaderBytes, so a head
// that fits the transport fits the recording.
const rawCap = 128 << 10

// recConn records the bytes written to and read from a connection while a
// request is under way, so that the page keeps the request and the response
// head exactly as they went over the wire. An HTTP/1.1 connection carries
// one request at a time, and the recording is reset when the transport
// hands the connection to a request (httptrace GotConn), so what it holds
// belongs to that request. The transport's read loop reads concurrently
// with the request's goroutine, hence the lock.
type recConn struct {
	net.Conn
	mu         sync.Mutex
	on         bool
	rbuf, wbuf []byte
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.on && len(c.rbuf) < rawCap {
			c.rbuf = append(c.rbuf, p[:min(n, rawCap-len(c.rbuf))]...)
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *recConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.on && len(c.wbuf) < rawCap {
		c.wbuf = append(c.wbuf, p[:min(len(p), rawCap-len(c.wbuf))]...)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// start resets the recording for a new request.
func (c *recConn) start() {
	c.mu.Lock()
	if c.rbuf == nil {
		c.rbuf = getHeadBuf()
	}
	c.on, c.rbuf, c.wbuf = true, c.rbuf[:0], c.wbuf[:0]
	c.mu.Unlock()
}

// headBufs recycles the buffers that record what a connection read while
// a request was under way (the response head and the start of its body,
// up to one read buffer, readBufferSize): once the head is split out of
// it (copied), the buffer is garbage, so every fetch would otherwise
// allocate and grow a new one.
var headBufs = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

func getHeadBuf() []byte { return (*headBufs.Get().(*[]byte))[:0] }

// putHeadBuf returns a buffer stop gave out; nothing may use it after.
// An unusually large one (a huge head) is left to the collector.
func putHeadBuf(b []byte) {
	if b == nil || cap(b) > 64<<10 {
		return
	}
	b = b[:0]
	headBufs.Put(&b)
}

// stop ends the recording and returns copies of what was written and read.
func (c *recConn) stop() (written, read []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	written, read = c.wbuf, c.rbuf
	// An idle connection keeps no buffers: the pool may hold a thousand.
	c.wbuf, c.rbuf = nil, nil
	return written, read
}

// headEnd returns the offset just past the blank line that ends the head
// at the start of b, or -1.
func headEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// splitRawHead finds the final response head in rec (skipping 1xx interim
// responses) and returns its status line (without line end) and header
// block (every line with its own line end, without the blank line).
func splitRawHead(rec []byte) (statusLine string, header []byte, ok bool) {
	for len(rec) > 0 {
		end := headEnd(rec)
		if end < 0 {
			return "", nil, false
		}
		head := rec[:end]
		nl := bytes.IndexByte(head, '\n')
		line := bytes.TrimRight(head[:nl], "\r")
		block := head[nl+1:]
		// Drop the blank line that ends the head.
		block = bytes.TrimSuffix(block, []byte("\n"))
		block = bytes.TrimSuffix(block, []byte("\r"))
		if code := statusCode(line); code >= 100 && code < 200 && code != 101 {
			rec = rec[end:]
			continue
		}
		return string(line), bytes.Clone(block), true
	}
	return "", nil, false
}

func statusCode(line []byte) int {
	f := bytes.Fields(line)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(string(f[1]))
	return n
}

// rebuildHead is the fallback when no raw head was recorded: the parsed
// header in wire format, names in canonical form, sorted, one
// "Name: value\r\n" line per value.
func rebuildHead(resp *http.Response) (statusLine string, header []byte) {
	statusLine = resp.Proto + " " + resp.Status
	var b bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		for _, v := range resp.Header[k] {
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteString("\r\n")
		}
	}
	return statusLine, b.Bytes()
}
