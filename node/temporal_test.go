package node

import (
	"errors"
	"testing"
)

func TestCheckTemporalAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7233", true},
		{"temporal.example.com:7233", true},
		{"[::1]:7233", true},
		{"dns:///temporal:7233", true},
		{"127.0.0.1", false},
		{"127.0.0.1:port", false},
		{"127.0.0.1:0", false},
		{"127.0.0.1:70000", false},
		{":7233", false},
		{"http://127.0.0.1:7233", false},
		{"", false},
	} {
		err := checkTemporalAddr(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("checkTemporalAddr(%q) = %v, want ok=%v", tc.addr, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrTemporalConfig) {
			t.Errorf("checkTemporalAddr(%q) = %v, not an ErrTemporalConfig", tc.addr, err)
		}
	}
}
