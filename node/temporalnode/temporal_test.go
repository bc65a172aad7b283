package temporalnode

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
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
		assert.Equalf(t, tc.ok, err == nil, "checkTemporalAddr(%q) = %v: ok", tc.addr, err)
		if err != nil && !errors.Is(err, ErrTemporalConfig) {
			assert.Fail(t, fmt.Sprintf("checkTemporalAddr(%q) = %v, not an ErrTemporalConfig", tc.addr, err))
		}
	}
}
