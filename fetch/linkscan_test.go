package fetch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinkTagsLargePageMatchesReference holds linkTags to refLinkTags on
// largePage and on its prefixes, so that EOF cuts every construct of a
// realistic page somewhere. The fuzz target leaves out this page: the
// fuzzer stalls minimizing inputs of 100 KB.
func TestLinkTagsLargePageMatchesReference(t *testing.T) {
	page := largePage()
	compared := 0
	for n := len(page); ; n = max(0, n-251) {
		got, want := linkTags(page[:n]), refLinkTags(page[:n])
		if !slices.EqualFunc(got, want, func(a, b tag) bool { return a.name == b.name && slices.Equal(a.attrs, b.attrs) }) {
			require.FailNow(t, fmt.Sprintf("prefix of %d bytes:\n%v\nreference %v", n, describe(got), describe(want)))
		}
		compared++
		if n == 0 {
			break
		}
	}
	assert.True(t, compared > 400, fmt.Sprint("compared ", compared, " prefixes"))
}
