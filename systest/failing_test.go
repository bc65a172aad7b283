package systest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/starter/cli"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On the whole stack: a campaign whose sink is a Kafka topic that
// does not exist. Every FetchSession fails on it; within 30 s the status
// query, `starter status` and a notification name the topic; after
// fail_after the campaign fails and `start --wait` exits 1 with the reason.
func TestMissingKafkaTopicFailsCampaign(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 20, Base: 61})
	s := startStack(t)
	notes := make(chan map[string]string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]string
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		notes <- m
	}))
	defer hook.Close()

	id := fmt.Sprintf("notopic-%d", rand.IntN(1e9))
	topic := "missing." + id
	file := filepath.Join(t.TempDir(), "campaign.yaml")
	yaml := fmt.Sprintf("fail_after: 20s\nfetchers: 2\nallow_private: true\nnotify_url: %s\nsinks: [%q]\nseeds: [%q]\n",
		hook.URL, "kafka://"+s.kafka.Addr()+"/"+topic, web.Seeds()[0])
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o644))
	app := func(out, errw io.Writer) *cli.App {
		return &cli.App{
			Env: cli.Env{Env: envconf.Env{TemporalAddress: s.temporal.Address(), TemporalNamespace: s.temporal.Namespace(), Schedulers: []string{s.sched.Addr()}, Token: session.DevToken}},
			Out: out, Err: errw, Dial: cli.DialTemporal, Stats: sessiontest.CampaignStats,
			Interval: 500 * time.Millisecond,
		}
	}

	var waitOut, waitErr devstack.SyncBuffer
	waited := make(chan int, 1)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	go func() {
		waited <- app(&waitOut, &waitErr).Run(ctx, []string{"start", "--id", id, "-f", file, "--wait"})
	}()

	c := s.temporal.Client()
	var st workflows.Status
	shown := await.For(t, 30*time.Second, 200*time.Millisecond, "the status query names the failure", func() error {
		var err error
		st, err = ctQueryStatus(t, c, id)
		if err == nil && (st.Failure == nil || !strings.Contains(st.Failure.Message, topic)) {
			err = fmt.Errorf("failure %+v", st.Failure)
		}
		return err
	})
	t.Logf("the status query named the failure %s after the start: %s", shown.Sub(began).Round(time.Millisecond), st.Failure.Text())
	assert.Equal(t, "SinkUnavailable", st.Failure.Reason, "the failure's reason")

	await.For(t, 30*time.Second, 200*time.Millisecond, "--wait's progress names the topic", func() error {
		if last := devstack.LastLines(waitErr.String(), 1); !strings.Contains(last, topic) {
			return fmt.Errorf("its last line %q", last)
		}
		return nil
	})
	var out, errb strings.Builder
	code := app(&out, &errb).Run(ctx, []string{"status", id})
	require.Zero(t, code, "status's exit code: %s", errb.String())
	t.Logf("starter status %s, %s after the start:\n%s", id, time.Since(began).Round(time.Second), out.String())
	assert.Contains(t, out.String(), "FAILING", "starter status does not show the failure")
	assert.Contains(t, out.String(), topic, "starter status does not show the failure")

	select {
	case m := <-notes:
		t.Logf("notification %s after the start: %s", time.Since(began).Round(time.Millisecond), m["text"])
		assert.Equal(t, "fetchers_failing", m["event"], "first notification %v, want fetchers_failing naming the topic", m)
		assert.Contains(t, m["text"], topic, "first notification %v, want fetchers_failing naming the topic", m)
	case <-time.After(30*time.Second - time.Since(began)):
		assert.Fail(t, "no notification within 30 s")
	}

	select {
	case code := <-waited:
		t.Logf("start --wait exited %d after %s; stderr ends:\n%s", code, time.Since(began).Round(time.Second), devstack.LastLines(waitErr.String(), 3))
		assert.Equal(t, cli.ExitFailure, code, "start --wait's exit code")
		last := devstack.LastLines(waitErr.String(), 1)
		assert.Contains(t, last, "campaign "+id+" failed", "start --wait's last line does not name the failure")
		assert.Contains(t, last, topic, "start --wait's last line does not name the failure")
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "start --wait still waiting 2 minutes after a 20 s fail_after")
	}
	ctCheckHistory(t, c, id, "", "failed_campaign_history.json")
}
