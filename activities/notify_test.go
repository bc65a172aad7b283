package activities

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNotifyPostsSlackCompatibleJSON(t *testing.T) {
	got := make(chan map[string]string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, http.MethodPost, r.Method, "a JSON POST")
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"), "a JSON POST")
		var m map[string]string
		b, _ := io.ReadAll(r.Body)
		assert.NoError(t, json.Unmarshal(b, &m), "body %q", b)
		got <- m
	}))
	defer srv.Close()
	a := &Activities{}
	err := a.Notify(context.Background(), workflows.NotifyInput{URL: srv.URL, Campaign: "c1", Event: "fetcher_restarts", Text: "campaign c1: 6 fetcher restarts in the last hour"})
	require.NoError(t, err)
	m := <-got
	assert.Equal(t, map[string]string{"text": "campaign c1: 6 fetcher restarts in the last hour", "campaign": "c1", "event": "fetcher_restarts"},
		map[string]string{"text": m["text"], "campaign": m["campaign"], "event": m["event"]}, "payload %v", m)
}

func TestNotifyReportsFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusInternalServerError)
	}))
	defer srv.Close()
	a := &Activities{}
	err := a.Notify(context.Background(), workflows.NotifyInput{URL: srv.URL, Text: "x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTP 500")
	assert.Error(t, a.Notify(context.Background(), workflows.NotifyInput{URL: "http://%zz", Text: "x"}), "a malformed notify URL gave no error")
}
