package bench

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-crawl/drover/testweb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// getAll GETs every page of web once, with the validators of known (URL
// to ETag, Last-Modified) when it holds the page, except for skip; it
// returns the validators each 200 carried.
func getAll(t *testing.T, web *testweb.Web, known map[string][2]string, skip string) map[string][2]string {
	t.Helper()
	got := map[string][2]string{}
	for _, u := range web.Pages() {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		if v, ok := known[u]; ok && u != skip {
			if v[0] != "" {
				req.Header.Set("If-None-Match", v[0])
			}
			if v[1] != "" {
				req.Header.Set("If-Modified-Since", v[1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			got[u] = [2]string{resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")}
		}
	}
	return got
}

// The recrawl checks read the server's log: a run 2 that asks for every
// page with run 1's validators passes; one that forgets a page's
// validators fails both checks (no validator, and a 200 where the
// unchanged page should have answered 304); one that fetches a page
// twice fails checkOnce.
func TestRecrawlChecks(t *testing.T) {
	web, err := testweb.Start(testweb.Config{Hosts: 2, PagesPerHost: 6, CrossHost: true, NoExtras: true,
		Validators: true, Duplicates: 2, Base: recrawlBase})
	require.NoError(t, err)
	defer web.Close()
	validators := getAll(t, web, nil, "")
	answered200 := web.Answered(200)
	require.Equal(t, len(web.Pages()), len(answered200), "run 1: pages answered 200, against all pages")
	changed := web.Change(0.25)
	isChanged := map[string]bool{}
	for _, u := range changed {
		isChanged[u] = true
	}
	var unchanged string
	for _, u := range web.Pages() {
		if !isChanged[u] {
			unchanged = u
			break
		}
	}

	web.Reset()
	getAll(t, web, validators, "")
	assert.Empty(t, checkConditional(web, answered200, changed), "every page asked for with its validators")

	web.Reset()
	getAll(t, web, validators, unchanged)
	failed := checkConditional(web, answered200, changed)
	assert.Falsef(t, len(failed) != 2 || !strings.Contains(failed[0], "1 of the") || !strings.Contains(failed[1], "answered 304"),
		"%s asked for without its validators: failed %q, want the validator and the 304 checks", unchanged, failed)

	web.Reset()
	getAll(t, web, validators, "")
	getAll(t, web, validators, "")
	var r Result
	r.Run = 2
	fillFromWeb(&r, web)
	f := checkOnce(&r)
	assert.Falsef(t, len(f) != 1 || r.Duplicates != len(web.Pages()), "every page fetched twice: %d duplicates, checkOnce %q", r.Duplicates, f)
}
