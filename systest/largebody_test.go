//go:build linux

// Linux only: the test reads the worker's peak RSS from /proc/PID/status.

package systest_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// largeBytes is the size of the large body: the 300 MiB.
const largeBytes = 300 << 20

// maxWorkerRSS bounds the worker process's peak resident memory while it
// fetches and stores the large body.
const maxWorkerRSS = 256 << 20

// TestLargeBodyWholeInWARC: a 300 MiB file, fetched by a worker process
// whose campaign sets no body cap, is stored whole in WARC: its response
// record's payload, read back and digested here, has the server's digest,
// as its WARC-Payload-Digest says, and no WARC-Truncated. The Kafka sink
// beside it (max_body 1 MiB by default) gets a record that points at that
// WARC record. The worker's peak RSS (VmHWM, its whole life) stays under
// 256 MiB.
func TestLargeBodyWholeInWARC(t *testing.T) {
	testenv.Long(t)
	testenv.NeedsRabbitMQ(t)
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 2, LinksPerPage: 4, NavLinks: 2, LargeBytes: largeBytes, Base: 157})
	s := startServices(t)
	addr := freeAddr(t)
	startSchedulerProc(t, addr, 0, 1, filepath.Join(t.TempDir(), "seen-0"))
	worker := startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())
	warcDir := t.TempDir()
	cfg := s.newCampaign("largebody", web, 1)
	cfg.Seeds = []string{web.LargeURL()}
	cfg.Sinks = append(cfg.Sinks, "warc:"+warcDir)
	wantDigest := web.LargeDigest()

	start := time.Now()
	st := runCampaign(t, s.temporal.Client(), cfg, 5*time.Minute)()
	took := time.Since(start)
	hwm := procStatusBytes(t, worker.PID(), "VmHWM")
	t.Logf("campaign %s: %d pages in %s; worker peak RSS (VmHWM) %d MiB", cfg.ID, st.PagesFetched, took.Round(time.Millisecond), hwm>>20)
	n := web.Count(web.LargeURL())
	assert.Equal(t, 1, n, "the server served the large file %d times, want 1", n)
	assert.Less(t, hwm, int64(maxWorkerRSS), "worker peak RSS %d MiB, want under %d MiB", hwm>>20, maxWorkerRSS>>20)

	rec := findWARCResponse(t, warcDir, web.LargeURL())
	t.Logf("WARC record at %s:%d: %d bytes of payload, %s", filepath.Base(rec.file), rec.offset, rec.payloadLen, rec.payloadSHA1)
	assert.Equal(t, int64(largeBytes), rec.payloadLen, "payload of %d bytes, want %d", rec.payloadLen, largeBytes)
	assert.Equal(t, wantDigest, rec.payloadSHA1, "payload digest %s, WARC-Payload-Digest %s, want the server's %s", rec.payloadSHA1, rec.fields["WARC-Payload-Digest"], wantDigest)
	assert.Equal(t, wantDigest, rec.fields["WARC-Payload-Digest"], "payload digest %s, WARC-Payload-Digest %s, want the server's %s", rec.payloadSHA1, rec.fields["WARC-Payload-Digest"], wantDigest)
	assert.NotContains(t, rec.fields, "WARC-Truncated", "WARC-Truncated: %s on a whole body", rec.fields["WARC-Truncated"])

	var found bool
	for _, m := range readTopic(t, s.kafka.Addr(), s.topic, 1) {
		if string(m.Key) != web.LargeURL() {
			continue
		}
		found = true
		h := map[string]string{}
		for _, kv := range m.Headers {
			h[kv.Key] = string(kv.Value)
		}
		want := map[string]string{"body-omitted": "too-large", "body-size": strconv.Itoa(largeBytes), "payload-digest": wantDigest,
			"warc-filename": filepath.Base(rec.file), "warc-offset": strconv.FormatInt(rec.offset, 10), "truncated": "false"}
		for k, v := range want {
			assert.Equal(t, v, h[k], "Kafka record header %s: %q, want %q", k, h[k], v)
		}
		assert.Empty(t, m.Value, "Kafka record value of %d bytes, want none", len(m.Value))
	}
	assert.True(t, found, "no Kafka record for %s", web.LargeURL())
	assert.Equal(t, campaign.StateCompleted, st.State, "state %s", st.State)
}

// procStatusBytes reads a "kB" field of /proc/PID/status, in bytes.
func procStatusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err, "reading the worker's memory")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err, "%s: %q", field, v)
			return kb << 10
		}
	}
	require.FailNowf(t, "field not in /proc/PID/status", "no %s in /proc/%d/status", field, pid)
	return 0
}

// warcResponse is a response record as streamed back: where it starts,
// its WARC fields, and its payload's length and digest.
type warcResponse struct {
	file        string
	offset      int64
	fields      map[string]string
	payloadLen  int64
	payloadSHA1 string
}

// findWARCResponse streams every record of the WARC files in dir, one
// gzip member each, never holding a block in memory, and returns the
// response record of uri.
func findWARCResponse(t *testing.T, dir, uri string) warcResponse {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	for _, file := range files {
		f, err := os.Open(file)
		require.NoError(t, err)
		defer f.Close()
		cr := &countingReader{r: bufio.NewReaderSize(f, 1<<20)}
		for {
			off := cr.n
			rec, ok := readMember(t, cr, uri)
			if !ok {
				break
			}
			if rec != nil {
				rec.file, rec.offset = file, off
				return *rec
			}
		}
	}
	require.FailNowf(t, "no response record", "no response record for %s in %v", uri, files)
	return warcResponse{}
}

// readMember reads one gzip member (one record) from r: ok is false at
// the end of the file; rec is set when it is the response of uri.
func readMember(t *testing.T, r *countingReader, uri string) (rec *warcResponse, ok bool) {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err == io.EOF {
		return nil, false
	}
	require.NoError(t, err, "gzip member at %d", r.n)
	zr.Multistream(false)
	br := bufio.NewReaderSize(zr, 64<<10)
	fields := map[string]string{}
	for {
		l, err := br.ReadString('\n')
		require.NoError(t, err, "WARC header")
		if l == "\r\n" {
			break
		}
		if k, v, found := strings.Cut(strings.TrimSpace(l), ": "); found {
			fields[k] = v
		}
	}
	if fields["WARC-Type"] == "response" && fields["WARC-Target-URI"] == uri {
		rec = &warcResponse{fields: fields}
		head, err := readHTTPHead(br)
		require.NoError(t, err, "HTTP head")
		length, _ := strconv.ParseInt(fields["Content-Length"], 10, 64)
		h := sha1.New()
		rec.payloadLen, err = io.CopyN(h, br, length-int64(len(head)))
		require.NoError(t, err, "payload: after %d bytes", rec.payloadLen)
		rec.payloadSHA1 = "sha1:" + base32.StdEncoding.EncodeToString(h.Sum(nil))
	}
	// The rest of the member, so that r stands at the next one.
	_, err = io.Copy(io.Discard, br)
	require.NoError(t, err, "record")
	return rec, true
}

// readHTTPHead reads an HTTP head up to and with its blank line.
func readHTTPHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		l, err := br.ReadSlice('\n')
		if err != nil {
			return head, err
		}
		head = append(head, l...)
	}
	return head, nil
}

// countingReader counts the bytes read through it; it is an io.ByteReader
// so that gzip reads no further than its member.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}
