package replay

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nlnwa/gowarc"
)

// WriteWARC writes an archive of responses for tests: one response record
// per Response (HTTP/1.1 status line, Header, Body), each record its own
// gzip member when file ends in .gz, as crawlers write them. Open reads it
// back.
func WriteWARC(file string, responses ...*Response) error {
	var out bytes.Buffer
	for _, res := range responses {
		var block bytes.Buffer
		fmt.Fprintf(&block, "HTTP/1.1 %s\r\n", describe(res.Status))
		if err := res.Header.Write(&block); err != nil {
			return fmt.Errorf("replay: writing %s: header: %w", res.URI, err)
		}
		block.WriteString("\r\n")
		block.Write(res.Body)
		if err := writeRecord(&out, strings.HasSuffix(file, ".gz"), gowarc.Response, block.Bytes(), gowarc.WarcTargetURI, res.URI); err != nil {
			return fmt.Errorf("replay: writing %s: %w", res.URI, err)
		}
	}
	if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// writeRecord appends a record of type typ to out: block, and fields
// (name, value pairs) in its WARC header besides the date and the content
// type.
func writeRecord(out *bytes.Buffer, gz bool, typ gowarc.RecordType, block []byte, fields ...string) error {
	b := gowarc.NewRecordBuilder(typ)
	if _, err := b.Write(block); err != nil {
		return err
	}
	for i := 0; i+1 < len(fields); i += 2 {
		b.AddWarcHeader(fields[i], fields[i+1])
	}
	b.AddWarcHeaderTime(gowarc.WarcDate, time.Now())
	b.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=response")
	rec, _, err := b.Build()
	if err != nil {
		return err
	}
	defer rec.Close()
	var w io.Writer = out
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(out)
		w = zw
	}
	if _, _, err := gowarc.NewMarshaler().Marshal(w, rec, 0); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}
