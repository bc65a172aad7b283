package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/session"
)

func TestURLCommand(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 5, 0, time.UTC)
	for _, c := range []struct {
		st   session.URLState
		err  error
		want []string
	}{
		{session.URLState{URL: "http://a.example/x", State: session.URLLeased, Scheduler: "s1", LeaseDeadline: at, Host: "a.example", HostQueue: 3},
			nil, []string{"campaign news~0abc: http://a.example/x is leased (on scheduler s1, until ", "host a.example holds 3 URLs here"}},
		{session.URLState{URL: "http://a.example/x", State: session.URLFailed, Failure: &failure.Record{Reason: "4xx", Attempts: 1, LastError: "404 Not Found", Last: at}},
			nil, []string{"is failed: 4xx after 1 attempts", "404 Not Found"}},
		{session.URLState{URL: "http://a.example/x", State: session.URLDone}, nil, []string{"is done: its page is stored"}},
		{session.URLState{URL: "http://a.example/x", State: session.URLEnded, Last: &session.LastFetch{Lineage: "news", Status: 200, Date: at}},
			nil, []string{"is ended", "last capture " + stamp(at) + ", status 200 (history of news)"}},
		{session.URLState{URL: "http://a.example/x", State: session.URLDone, Last: &session.LastFetch{Lineage: "news", Status: 200, Date: at, Fetched: at.Add(time.Hour), NextDue: at.Add(3 * time.Hour)}},
			nil, []string{"fetched again " + stamp(at.Add(time.Hour)) + ", next fetch due " + stamp(at.Add(3*time.Hour))}},
		{session.URLState{URL: "http://a.example/x", State: session.URLUnknown}, errors.New("scheduler s2: refused"),
			[]string{"is unknown: never queued"}},
	} {
		var out, errb bytes.Buffer
		var gotKey, gotURL string
		app := &App{Out: &out, Err: &errb, Env: Env{Env: envconf.Env{Schedulers: []string{"s1", "s2"}}},
			URLState: func(_ context.Context, addrs []string, _, key, url string) (session.URLState, error) {
				gotKey, gotURL = key, url
				return c.st, c.err
			}}
		code := app.Run(context.Background(), []string{"url", "news~0abc", "http://a.example/x"})
		require.Equalf(t, 0, code, "exit code; stderr: %s", errb.String())
		if gotKey != "news~0abc" || gotURL != "http://a.example/x" {
			assert.Fail(t, fmt.Sprintf("asked for %q in %q", gotURL, gotKey))
		}
		for _, w := range c.want {
			assert.Contains(t, out.String(), w, "output")
		}
		assert.Equalf(t, c.err != nil, strings.Contains(errb.String(), "not every scheduler answered"), "stderr %q says not every scheduler answered, with the error %v", errb.String(), c.err)
	}

	var out bytes.Buffer
	app := &App{Out: &out, Err: &out, URLState: func(context.Context, []string, string, string, string) (session.URLState, error) {
		return session.URLState{URL: "http://a.example/x", State: session.URLHeld, Attempt: 2}, nil
	}}
	code := app.Run(context.Background(), []string{"url", "news~0abc", "http://a.example/x", "--json"})
	require.Equalf(t, 0, code, "exit code; output: %s", out.String())
	var st session.URLState
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.State != session.URLHeld || st.Attempt != 2 {
		assert.Fail(t, fmt.Sprintf("--json: %q, %v", out.String(), err))
	}

	out.Reset()
	app = &App{Out: &out, Err: &out, URLState: func(context.Context, []string, string, string, string) (session.URLState, error) {
		return session.URLState{}, errors.New("scheduler s1: connection refused")
	}}
	if code := app.Run(context.Background(), []string{"url", "news~0abc", "http://a.example/x"}); code == 0 || !strings.Contains(out.String(), "connection refused") {
		assert.Fail(t, fmt.Sprintf("no scheduler answering: exit %d, %q", code, out.String()))
	}
}
