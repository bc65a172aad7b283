package session

import (
	"bytes"
	"encoding/binary"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drover-crawl/drover/urlrule"
)

// The codec, both ends' half of every frame: what one end writes, the
// other reads back; a length prefix the protocol does not allow is an
// error before any payload is read.
func TestFrameCodec(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	in := Leases{Items: []Lease{{ID: 7, Kind: KindRobots, URL: "http://a.test/", Attempt: 1}}}
	if err := fw.WriteFrame(FrameLeases, in); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteFrame(FramePing, nil); err != nil {
		t.Fatal(err)
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	fr := NewFrameReader(&buf)
	typ, payload, err := fr.ReadFrame()
	if err != nil || typ != FrameLeases {
		t.Fatalf("first frame: %s, %v; want leases", typ, err)
	}
	var out Leases
	if err := Decode(typ, payload, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 || out.Items[0] != in.Items[0] {
		t.Fatalf("leases read back %+v, want %+v", out, in)
	}
	if typ, payload, err = fr.ReadFrame(); err != nil || typ != FramePing || len(payload) != 0 {
		t.Fatalf("second frame: %s (%d bytes), %v; want an empty ping", typ, len(payload), err)
	}

	for _, c := range []struct {
		name   string
		length uint32
		want   error
	}{
		{"empty", 0, ErrBadFrame},
		{"above MaxFrame", MaxFrame + 1, ErrFrameTooLarge},
	} {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], c.length)
		if _, _, err := NewFrameReader(bytes.NewReader(hdr[:])).ReadFrame(); !errors.Is(err, c.want) {
			t.Errorf("%s frame: %v, want %v", c.name, err, c.want)
		}
	}
	if err := Decode(FrameCredit, []byte("{"), &Credit{}); !errors.Is(err, ErrBadFrame) {
		t.Errorf("undecodable payload: %v, want ErrBadFrame", err)
	}
}

// outcomesFrame is a typical outcomes frame: 8 pages of 25 links each.
func outcomesFrame() Outcomes {
	var os Outcomes
	for i := range 8 {
		o := Outcome{LeaseID: uint64(1000 + i), Stored: true, Status: 200, Took: 1234567 * time.Nanosecond, Reason: "", HostDown: i == 3}
		for j := range 25 {
			o.Links = append(o.Links, urlrule.Link{URL: fmt.Sprintf("http://host%d.test:8080/section/page-%d.html?q=%%C3%%A9", j%20, i*100+j), Hops: j % 2, Score: float64(j) / 3})
		}
		os.Items = append(os.Items, o)
	}
	os.Items[7] = Outcome{LeaseID: 9, Retry: true, RetryAfter: time.Second, Error: "bad \xff byte \u2028 <tag> \"q\"", Robots: &RobotsBody{Status: 200, Body: []byte("User-agent: *\nDisallow: /x\n\x00")}}
	return os
}

// The frames stay plain JSON, whatever encodes them: what encoding/json
// writes, Decode reads the same, and encoding/json reads what WriteFrame
// writes (a peer of an older build, or a person with tcpdump).
func TestFramesAreStandardJSON(t *testing.T) {
	in := outcomesFrame()
	std, err := stdjson.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var got Outcomes
	if err := Decode(FrameOutcomes, std, &got); err != nil {
		t.Fatal(err)
	}
	var want Outcomes
	if err := stdjson.Unmarshal(std, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode of encoding/json's frame:\n%+v\nencoding/json reads:\n%+v", got, want)
	}

	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	if err := fw.WriteFrame(FrameOutcomes, in); err != nil {
		t.Fatal(err)
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	_, payload, err := NewFrameReader(&buf).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var back Outcomes
	if err := stdjson.Unmarshal(payload, &back); err != nil {
		t.Fatalf("encoding/json cannot read WriteFrame's payload: %v", err)
	}
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("encoding/json reads WriteFrame's frame as\n%+v\nwant\n%+v", back, want)
	}
}

// BenchmarkOutcomesFrame is the scheduler's cost of one outcomes frame
// (its decode) and the fetcher's (its encode).
func BenchmarkOutcomesFrame(b *testing.B) {
	in := outcomesFrame()
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := fw.WriteFrame(FrameOutcomes, in); err != nil {
				b.Fatal(err)
			}
			if err := fw.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	})
	payload := buf.Bytes()[5:]
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			var out Outcomes
			if err := Decode(FrameOutcomes, payload, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzDecode: a frame from the network is any bytes. Decode never panics,
// refuses what encoding/json refuses, and reads what it accepts as it does.
func FuzzDecode(f *testing.F) {
	std, _ := stdjson.Marshal(outcomesFrame())
	f.Add(std)
	f.Add([]byte(`{"items":[{"lease":1,"links":[{"url":"http://a/\ud800"}],"took":1e3}]}`))
	f.Add([]byte(`{"items":[{"lease":-1,"status":"x"}]}`))
	f.Add([]byte(`{"items":[{"LEASE":2,"stored":true,"stored":false,"robots":{"body":"AAE="}}]}`))
	f.Add([]byte("{\"items\":[{\"error\":\"\xff\"}]}"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var got, want Outcomes
		err := Decode(FrameOutcomes, payload, &got)
		stdErr := stdjson.Unmarshal(payload, &want)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("Decode(%q): %v; encoding/json: %v", payload, err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %+v; encoding/json reads %+v", payload, got, want)
		}
	})
}
