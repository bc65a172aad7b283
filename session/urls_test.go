package session

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Paging through two schedulers' URLs page by page, each answering its
// own page after the cursor, yields every URL once and in order, whatever
// the page size and however the URLs are split between them.
func TestMergedPagesListEveryURLOnce(t *testing.T) {
	var a, b, want []string
	for i := range 57 {
		u := fmt.Sprintf("http://h.example/%03d", i)
		want = append(want, u)
		if i%3 == 0 || i > 40 {
			a = append(a, u)
		} else {
			b = append(b, u)
		}
	}
	for _, limit := range []int{1, 4, 10, 56, 57, 100} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "limit %d: paging does not end", limit)
			q := URLQuery{After: after, Limit: limit}
			page := mergePages([]URLPage{q.Cut(a), q.Cut(b)}, []error{nil, nil}, limit)
			require.LessOrEqual(t, len(page.URLs), limit)
			got = append(got, page.URLs...)
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		require.Equal(t, want, got, "limit %d", limit)
	}
}

func TestMergedPageLeavesOutASchedulerThatFailed(t *testing.T) {
	q := URLQuery{Limit: 10}
	page := mergePages([]URLPage{q.Cut([]string{"a", "c"}), {URLs: []string{"b"}}}, []error{nil, errors.New("away")}, 10)
	require.Equal(t, URLPage{URLs: []string{"a", "c"}}, page)
	require.True(t, slices.IsSorted(page.URLs))
}

// A scheduler that read its index up to a cursor and found nothing in
// the state answers an empty page with that cursor: the merged page is
// empty too, and carries it, so that paging goes on from there.
func TestMergedPageKeepsTheCursorOfAnEmptyPage(t *testing.T) {
	page := mergePages([]URLPage{{Next: "m"}, {URLs: []string{"z"}}}, []error{nil, nil}, 10)
	require.Empty(t, page.URLs)
	require.Equal(t, "m", page.Next)
	page = mergePages([]URLPage{{URLs: []string{"a"}, Next: "m"}, {URLs: []string{"b", "z"}}}, []error{nil, nil}, 10)
	require.Equal(t, URLPage{URLs: []string{"a", "b"}, Next: "m"}, page)
}
