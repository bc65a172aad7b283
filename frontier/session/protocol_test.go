package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
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

// A URL recorded by two schedulers (after a failover) keeps the newer
// record with the earliest First.
func TestFailureRecordMerge(t *testing.T) {
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	cases := []struct {
		name      string
		old, f    FailureRecord
		wantFirst time.Time
	}{
		{"older first kept", FailureRecord{First: t1}, FailureRecord{First: t2, Attempts: 3}, t1},
		{"newer first is earlier", FailureRecord{First: t2}, FailureRecord{First: t1, Attempts: 3}, t1},
		{"none before", FailureRecord{}, FailureRecord{First: t2, Attempts: 3}, t2},
		{"none in the new one", FailureRecord{First: t1}, FailureRecord{Attempts: 3}, t1},
	}
	for _, c := range cases {
		got := c.old.Merge(c.f)
		if !got.First.Equal(c.wantFirst) || got.Attempts != 3 {
			t.Errorf("%s: %+v, want First %v and the new record's Attempts", c.name, got, c.wantFirst)
		}
	}
}
