package fetch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/cpubench"
)

// BenchmarkFetchSmallPage measures one whole fetch of an 8 KB page over
// a keep-alive loopback connection (the test server's CPU counts too): request, head, body, links. It is
// the path every ordinary page takes, which bodies of any size must not
// slow (a body under the spool threshold is read as before).
func BenchmarkFetchSmallPage(b *testing.B) {
	body := benchPage()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	f, err := New(testConfig(srv.URL))
	require.NoError(b, err)
	defer f.Close()
	ctx := context.Background()
	b.ReportAllocs()
	stop := cpubench.Start(b)
	for b.Loop() {
		res := f.Fetch(ctx, Request{URL: srv.URL + "/section/page.html"})
		if res.Page == nil || res.Page.Status != 200 {
			require.FailNow(b, fmt.Sprint(res.Err))
		}
	}
	stop()
}
