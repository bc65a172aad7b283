package session

import (
	"bytes"
	"encoding/binary"
	stdjson "encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The codec, both ends' half of every frame: what one end writes, the
// other reads back; a length prefix the protocol does not allow is an
// error before any payload is read.
func TestFrameCodec(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	in := Leases{Items: []Lease{{ID: 7, Kind: KindRobots, URL: "http://a.test/", Attempt: 1}}}
	require.NoError(t, fw.WriteFrame(FrameLeases, in))
	require.NoError(t, fw.WriteFrame(FramePing, nil))
	require.NoError(t, fw.Flush())
	fr := NewFrameReader(&buf)
	typ, payload, err := fr.ReadFrame()
	require.NoError(t, err, "first frame")
	require.Equal(t, FrameLeases, typ, "first frame")
	var out Leases
	require.NoError(t, Decode(typ, payload, &out))
	if len(out.Items) != 1 || out.Items[0] != in.Items[0] {
		require.FailNow(t, fmt.Sprintf("leases read back %+v, want %+v", out, in))
	}
	if typ, payload, err = fr.ReadFrame(); err != nil || typ != FramePing || len(payload) != 0 {
		require.FailNow(t, fmt.Sprintf("second frame: %s (%d bytes), %v; want an empty ping", typ, len(payload), err))
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
		_, _, err := NewFrameReader(bytes.NewReader(hdr[:])).ReadFrame()
		assert.ErrorIsf(t, err, c.want, "%s frame", c.name)
	}
	assert.ErrorIs(t, Decode(FrameCredit, []byte("{"), &Credit{}), ErrBadFrame, "undecodable payload")
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
	require.NoError(t, err)
	var got Outcomes
	require.NoError(t, Decode(FrameOutcomes, std, &got))
	var want Outcomes
	require.NoError(t, stdjson.Unmarshal(std, &want))
	require.Equal(t, want, got, "Decode of encoding/json's frame (expected: what encoding/json reads)")

	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	require.NoError(t, fw.WriteFrame(FrameOutcomes, in))
	require.NoError(t, fw.Flush())
	_, payload, err := NewFrameReader(&buf).ReadFrame()
	require.NoError(t, err)
	var back Outcomes
	require.NoError(t, stdjson.Unmarshal(payload, &back), "encoding/json cannot read WriteFrame's payload")
	require.Equal(t, want, back, "what encoding/json reads of WriteFrame's frame")
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
			// Checked inside an if: testify's Helper call stays out of the timed loop.
			if err := fw.WriteFrame(FrameOutcomes, in); err != nil {
				require.NoError(b, err)
			}
			if err := fw.Flush(); err != nil {
				require.NoError(b, err)
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
				require.NoError(b, err)
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
			require.FailNow(t, fmt.Sprintf("Decode(%q): %v; encoding/json: %v", payload, err, stdErr))
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			require.FailNow(t, fmt.Sprintf("Decode(%q) = %+v; encoding/json reads %+v", payload, got, want))
		}
	})
}
