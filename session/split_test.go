package session

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkSplit checks splitOutcomes(outs, limit) against its contract, with
// the measure the writer uses (outcomeSize, which estimates an outcome's
// JSON size from above):
//   - the parts, in order, are outs: no outcome lost, duplicated or moved
//     (each outcome of outs has a LeaseID of its own);
//   - no part is empty (no input, no parts);
//   - a part's outcomes add up to at most limit, unless it is one outcome
//     that alone is over it (the fetcher's caps bound such an outcome far
//     below MaxFrame; it is sent alone);
//   - a part ends only where its next outcome would take it over limit, so
//     the writer sends no more frames than the limit needs.
//
// It returns the parts' LeaseIDs.
func checkSplit(t *testing.T, outs []Outcome, limit int) [][]uint64 {
	t.Helper()
	parts := splitOutcomes(outs, limit)
	var got []uint64
	ids := make([][]uint64, len(parts))
	for i, p := range parts {
		size := 0
		for _, o := range p {
			size += outcomeSize(o)
			ids[i] = append(ids[i], o.LeaseID)
		}
		got = append(got, ids[i]...)
		switch {
		case len(p) == 0:
			assert.Fail(t, fmt.Sprintf("part %d of %d is empty", i, len(parts)))
		case len(p) > 1 && size > limit:
			assert.Fail(t, fmt.Sprintf("part %d of %d: %d outcomes of %d estimated bytes, over the limit of %d", i, len(parts), len(p), size, limit))
		}
		if i+1 < len(parts) && len(parts[i+1]) > 0 {
			if next := outcomeSize(parts[i+1][0]); size+next <= limit {
				assert.Fail(t, fmt.Sprintf("part %d of %d ends at %d bytes, but the next outcome (%d bytes) fits under the limit of %d", i, len(parts), size, next, limit))
			}
		}
	}
	var want []uint64
	for _, o := range outs {
		want = append(want, o.LeaseID)
	}
	if !slices.Equal(got, want) {
		assert.Fail(t, fmt.Sprintf("the parts hold outcomes %v, want %v (limit %d)", brief(got), brief(want), limit))
	}
	return ids
}

// brief shows a list of lease IDs, its middle cut when long.
func brief(ids []uint64) string {
	if len(ids) <= 20 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v ... %v (%d)", ids[:10], ids[len(ids)-10:], len(ids))
}

// linksOf returns n links whose URLs are length bytes long.
func linksOf(n, length int) []urlrule.Link {
	links := make([]urlrule.Link, n)
	for i := range links {
		u := fmt.Sprintf("http://h.example/%d/", i)
		links[i] = urlrule.Link{URL: u + strings.Repeat("x", max(0, length-len(u)))}
	}
	return links
}

func TestSplitOutcomesCases(t *testing.T) {
	plain := func(id uint64) Outcome { return Outcome{LeaseID: id, Stored: true, Status: 200} }
	withLinks := func(id uint64, n int) Outcome {
		o := plain(id)
		o.Links = linksOf(n, 100)
		return o
	}
	s := outcomeSize(plain(1)) // every plain outcome's size
	big := withLinks(2, 10_000)
	for _, tc := range []struct {
		name  string
		outs  []Outcome
		limit int
		want  [][]uint64
	}{
		{"nil", nil, 1 << 20, nil},
		{"empty", []Outcome{}, 1 << 20, nil},
		{"one under the limit", []Outcome{plain(1)}, 1 << 20, [][]uint64{{1}}},
		{"one alone over the limit", []Outcome{big}, 1 << 10, [][]uint64{{2}}},
		{"all fit", []Outcome{plain(1), plain(2), plain(3)}, 3 * s, [][]uint64{{1, 2, 3}}},
		{"a part may reach the limit exactly", []Outcome{plain(1), plain(2), plain(3)}, 2 * s, [][]uint64{{1, 2}, {3}}},
		{"one byte short", []Outcome{plain(1), plain(2), plain(3)}, 2*s - 1, [][]uint64{{1}, {2}, {3}}},
		{"limit under every outcome", []Outcome{plain(1), plain(2), plain(3)}, 1, [][]uint64{{1}, {2}, {3}}},
		{"limit 0", []Outcome{plain(1), plain(2)}, 0, [][]uint64{{1}, {2}}},
		{"an outcome over the limit between small ones", []Outcome{plain(1), plain(3), big, plain(4), plain(5)}, 2 * s, [][]uint64{{1, 3}, {2}, {4, 5}}},
		{"two over the limit in a row", []Outcome{withLinks(1, 5000), withLinks(2, 5000), plain(3)}, 1 << 10, [][]uint64{{1}, {2}, {3}}},
		{"many links each", []Outcome{withLinks(1, 3000), withLinks(2, 3000), withLinks(3, 3000)}, 2 * outcomeSize(withLinks(1, 3000)), [][]uint64{{1, 2}, {3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkSplit(t, tc.outs, tc.limit); !slices.EqualFunc(got, tc.want, slices.Equal) {
				assert.Fail(t, fmt.Sprintf("parts %v, want %v", got, tc.want))
			}
		})
	}
}

// TestSplitOutcomesRandom checks the contract on random outcome lists:
// outcomes with no links, few links or thousands, errors and robots.txt
// bodies, cut at limits from under the smallest outcome to over all of
// them, and at a limit equal to a run of the list's own sizes (a part
// exactly at it).
func TestSplitOutcomesRandom(t *testing.T) {
	const seed = 20
	r := rand.New(rand.NewPCG(seed, seed))
	// Link lists to share between outcomes: building thousands of links
	// per outcome for every list would cost the test most of its time.
	pool := [][]urlrule.Link{nil, linksOf(1, 30), linksOf(7, 200), linksOf(120, 80), linksOf(2500, 120), linksOf(10_000, 60)}
	for iter := range 1000 {
		n := r.IntN(40)
		if iter%10 == 0 {
			n = 0
		}
		outs := make([]Outcome, n)
		for i := range outs {
			o := Outcome{LeaseID: uint64(i + 1), Stored: true, Status: 200}
			switch r.IntN(6) {
			case 0:
				o.Stored, o.Retry, o.Error = false, true, strings.Repeat("e", r.IntN(2000))
			case 1:
				o.Robots = &RobotsBody{Status: 200, Body: []byte(strings.Repeat("Disallow: /x\n", r.IntN(5000)))}
			default:
				o.Links = pool[r.IntN(len(pool))]
			}
			outs[i] = o
		}
		total, smallest := 0, 1<<62
		for _, o := range outs {
			total += outcomeSize(o)
			smallest = min(smallest, outcomeSize(o))
		}
		var limit int
		switch k := r.IntN(5); {
		case k == 0:
			limit = r.IntN(max(1, smallest)) // under every outcome
		case k == 1:
			limit = total + r.IntN(1000) // over all of them
		case k == 2 && n > 0:
			// Exactly the size of a run of consecutive outcomes.
			i := r.IntN(n)
			j := i + 1 + r.IntN(n-i)
			for _, o := range outs[i:j] {
				limit += outcomeSize(o)
			}
		default:
			limit = r.IntN(total + 1)
		}
		t.Run(fmt.Sprintf("%d-n%d-limit%d", iter, n, limit), func(t *testing.T) {
			checkSplit(t, outs, limit)
		})
		if t.Failed() {
			require.FailNow(t, fmt.Sprintf("seed %d: stopped at the first failing list", seed))
		}
	}
}
