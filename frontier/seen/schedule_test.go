package seen_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A revisit schedule gives its entries back earliest first, up to a time
// and a limit; replacing an entry (remove and add in one write) leaves the
// URL one; a campaign's is its own, counted with its earliest time, and
// goes with Drop; a reopened Pebble still has it.
func TestSeenStoreSchedule(t *testing.T) {
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, reopen := impl.open(t)
			base := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
			k := keys("v", 4)
			var add []seen.Due
			for i := range k {
				// Written latest first: the store orders them.
				add = append(add, seen.Due{Key: k[i], At: base.Add(time.Duration(4-i) * time.Hour), Msg: []byte(fmt.Sprint(i))})
			}
			require.NoError(t, s.Schedule("news~r1", add, nil))
			require.NoError(t, s.Schedule("other", add[:1], nil))
			due, err := s.DueBy("news~r1", base.Add(2*time.Hour), 10)
			if err != nil || len(due) != 2 || string(due[0].Msg) != "3" || string(due[1].Msg) != "2" || !due[0].At.Equal(base.Add(time.Hour)) {
				require.FailNow(t, fmt.Sprintf("due by 2h: %+v, %v; want keys 3 and 2, earliest first", due, err))
			}
			limited, _ := s.DueBy("news~r1", base.Add(10*time.Hour), 3)
			assert.Len(t, limited, 3, "limit 3")
			// Key 3 fetched: its entry at 1h replaced by one at 6h.
			require.NoError(t, s.Schedule("news~r1", []seen.Due{{Key: k[3], At: base.Add(6 * time.Hour), Msg: []byte("3b")}}, due[:1]))
			if reopen != nil {
				s = reopen(s)
			}
			n, next, err := s.Scheduled("news~r1")
			if err != nil || n != 4 || !next.Equal(base.Add(2*time.Hour)) {
				assert.Fail(t, fmt.Sprintf("scheduled: %d, next %v, %v; want 4, next at 2h", n, next, err))
			}
			all, _ := s.DueBy("news~r1", base.Add(24*time.Hour), 10)
			if len(all) != 4 || string(all[3].Msg) != "3b" {
				assert.Fail(t, fmt.Sprintf("after the replace: %+v", all))
			}
			// An entry by its key and time: the replaced one is gone.
			if msg, err := s.Entry("news~r1", base.Add(6*time.Hour), k[3]); err != nil || string(msg) != "3b" {
				assert.Fail(t, fmt.Sprintf("Entry of key 3 at 6h: %q, %v; want 3b", msg, err))
			}
			for _, at := range []time.Time{base.Add(time.Hour), base.Add(5 * time.Hour)} {
				if msg, err := s.Entry("news~r1", at, k[3]); err != nil || msg != nil {
					assert.Fail(t, fmt.Sprintf("Entry of key 3 at %s: %q, %v; want none", at.Sub(base), msg, err))
				}
			}
			msg, _ := s.Entry("other", base.Add(6*time.Hour), k[3])
			assert.Nil(t, msg, "Entry of another campaign")
			require.NoError(t, s.Drop("news~r1"))
			n, _, _ = s.Scheduled("news~r1")
			assert.Zero(t, n, "entries after Drop")
			n, _, _ = s.Scheduled("other")
			assert.Equal(t, int64(1), n, "another campaign's schedule: entries")
		})
	}
}
