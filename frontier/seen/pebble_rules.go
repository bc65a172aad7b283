package seen

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// A campaign's live rules in a Pebble: key 'r', the campaign, 0x00; value
// the rules as given (campaign.Rules as JSON). One key per campaign,
// written with the WAL synced: the rules change a few times a crawl.
const kindRules byte = 'r'

func rulesKey(c string) []byte { return append(append([]byte{kindRules}, c...), 0) }

// SetRules implements Store.
func (s *Pebble) SetRules(c string, rules []byte) error {
	return s.use(c, func(db *pebble.DB) error {
		if err := db.Set(rulesKey(c), rules, pebble.Sync); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		return nil
	}, func(mem *Memory) error { return mem.SetRules(c, rules) })
}

// Rules implements Store.
func (s *Pebble) Rules(c string) (out []byte, err error) {
	err = s.use(c, func(db *pebble.DB) error {
		return s.get(db, rulesKey(c), func(v []byte) { out = slices.Clone(v) })
	}, func(mem *Memory) (err error) { out, err = mem.Rules(c); return err })
	return out, err
}
