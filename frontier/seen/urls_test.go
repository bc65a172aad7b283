package seen_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/frontier/seen"
)

// The URL index lists one host's URLs of one campaign, in URL order, a
// page at a time from a cursor, each once however often it was indexed;
// it keeps them over a restart and forgets them with Drop, and a host or
// a campaign whose name starts like another's keeps its own.
func TestSeenStoreURLIndex(t *testing.T) {
	for _, impl := range seenImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s, reopen := impl.open(t)
			var urls []seen.HostURL
			for i := range 25 {
				urls = append(urls, seen.HostURL{Host: "a.example", URL: fmt.Sprintf("http://a.example/%02d", 24-i)})
			}
			urls = append(urls, seen.HostURL{Host: "a.example.org", URL: "http://a.example.org/x"}, seen.HostURL{Host: "b.example", URL: "http://b.example/"})
			require.NoError(t, s.IndexURLs("c", urls))
			require.NoError(t, s.IndexURLs("c", urls[:3]))     // again: listed once
			require.NoError(t, s.IndexURLs("c1", urls[25:26])) // another campaign
			if reopen != nil {
				s = reopen(s)
			}
			var got []string
			after := ""
			for range 10 {
				page, err := s.HostURLs("c", "a.example", after, 10)
				require.NoError(t, err)
				got = append(got, page...)
				if len(page) < 10 {
					break
				}
				after = page[len(page)-1]
			}
			var want []string
			for i := range 25 {
				want = append(want, fmt.Sprintf("http://a.example/%02d", i))
			}
			assert.Equal(t, want, got)
			page, err := s.HostURLs("c", "a.example", "http://a.example/05", 2)
			require.NoError(t, err)
			assert.Equal(t, []string{"http://a.example/06", "http://a.example/07"}, page, "after a cursor")
			page, err = s.HostURLs("c", "a.example.org", "", 10)
			require.NoError(t, err)
			assert.Equal(t, []string{"http://a.example.org/x"}, page)
			page, err = s.HostURLs("c", "nowhere.example", "", 10)
			require.NoError(t, err)
			assert.Empty(t, page)

			require.NoError(t, s.Drop("c"))
			page, err = s.HostURLs("c", "a.example", "", 10)
			require.NoError(t, err)
			assert.Empty(t, page, "dropped with the marks")
			page, err = s.HostURLs("c1", "a.example.org", "", 10)
			require.NoError(t, err)
			assert.Equal(t, []string{"http://a.example.org/x"}, page, "another campaign's index stays")
			assert.Error(t, s.IndexURLs("c", []seen.HostURL{{Host: "a\x00b", URL: "http://x/"}}), "a host with a 0 byte")
		})
	}
}
