package seen

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// A campaign's URL index in a Pebble: key 'u', the campaign, 0x00, the
// host, 0x00, the URL; no value. The marks keep 128-bit hashes, not URLs:
// the index is what lets a scheduler list the URLs of one host it queued
// (`starter urls`), in URL order. It is written without waiting for the
// WAL (a URL missing from it after a crash is only missing from a list)
// and dropped with the marks.
const kindURL byte = 'u'

func urlKey(buf []byte, c, host, url string) []byte {
	buf = append(append(append(buf[:0], kindURL), c...), 0)
	buf = append(append(buf, host...), 0)
	return append(buf, url...)
}

// IndexURLs implements Store.
func (s *Pebble) IndexURLs(c string, urls []HostURL) error {
	if err := checkIndexed(urls); err != nil {
		return err
	}
	return s.use(c, func(db *pebble.DB) error {
		if len(urls) == 0 {
			return nil
		}
		b := db.NewBatch()
		defer b.Close()
		var buf []byte
		for _, u := range urls {
			buf = urlKey(buf, c, u.Host, u.URL)
			if err := b.Set(buf, nil, nil); err != nil {
				return fmt.Errorf("seen store: %w", err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		return nil
	}, func(mem *Memory) error { return mem.IndexURLs(c, urls) })
}

// HostURLs implements Store: one iterator over the host's span, from
// after.
func (s *Pebble) HostURLs(c, host, after string, limit int) (out []string, err error) {
	if strings.IndexByte(host, 0) >= 0 {
		return nil, fmt.Errorf("seen store: bad host %q", host)
	}
	err = s.use(c, func(db *pebble.DB) error {
		prefix := urlKey(nil, c, host, "")
		hi := append(bytes.Clone(prefix[:len(prefix)-1]), 1)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		ok := it.First()
		if after != "" {
			from := urlKey(nil, c, host, after)
			if ok = it.SeekGE(from); ok && bytes.Equal(it.Key(), from) {
				ok = it.Next()
			}
		}
		for ; ok && len(out) < limit; ok = it.Next() {
			out = append(out, string(it.Key()[len(prefix):]))
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		return nil
	}, func(mem *Memory) (err error) { out, err = mem.HostURLs(c, host, after, limit); return err })
	return out, err
}

func checkIndexed(urls []HostURL) error {
	for _, u := range urls {
		if strings.IndexByte(u.Host, 0) >= 0 {
			return fmt.Errorf("seen store: bad host %q", u.Host)
		}
	}
	return nil
}
