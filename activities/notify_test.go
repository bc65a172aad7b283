package activities

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-crawl/drover/workflows"
)

func TestNotifyPostsSlackCompatibleJSON(t *testing.T) {
	got := make(chan map[string]string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s with content type %q, want a JSON POST", r.Method, r.Header.Get("Content-Type"))
		}
		var m map[string]string
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("body %q: %v", b, err)
		}
		got <- m
	}))
	defer srv.Close()
	a := &Activities{}
	err := a.Notify(context.Background(), workflows.NotifyInput{URL: srv.URL, Campaign: "c1", Event: "fetcher_restarts", Text: "campaign c1: 6 fetcher restarts in the last hour"})
	if err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m["text"] != "campaign c1: 6 fetcher restarts in the last hour" || m["campaign"] != "c1" || m["event"] != "fetcher_restarts" {
		t.Errorf("payload %v", m)
	}
}

func TestNotifyReportsFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusInternalServerError)
	}))
	defer srv.Close()
	a := &Activities{}
	err := a.Notify(context.Background(), workflows.NotifyInput{URL: srv.URL, Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Errorf("err = %v, want one naming HTTP 500", err)
	}
	if err := a.Notify(context.Background(), workflows.NotifyInput{URL: "http://%zz", Text: "x"}); err == nil {
		t.Error("a malformed notify URL gave no error")
	}
}
