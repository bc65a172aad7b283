package failure

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A URL recorded by two schedulers (after a failover) keeps the newer
// record with the earliest First.
func TestRecordMerge(t *testing.T) {
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	cases := []struct {
		name      string
		old, f    Record
		wantFirst time.Time
	}{
		{"older first kept", Record{First: t1}, Record{First: t2, Attempts: 3}, t1},
		{"newer first is earlier", Record{First: t2}, Record{First: t1, Attempts: 3}, t1},
		{"none before", Record{}, Record{First: t2, Attempts: 3}, t2},
		{"none in the new one", Record{First: t1}, Record{Attempts: 3}, t1},
	}
	for _, c := range cases {
		got := c.old.Merge(c.f)
		if !got.First.Equal(c.wantFirst) || got.Attempts != 3 {
			assert.Fail(t, fmt.Sprintf("%s: %+v, want First %v and the new record's Attempts", c.name, got, c.wantFirst))
		}
	}
}
