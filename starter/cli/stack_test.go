package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
)

// realStack is a whole drover on loopback for the starter to drive: a
// Temporal dev server from bin/temporal, an in-memory Kafka, a scheduler on
// the machine's RabbitMQ and a worker, all on free ports.
type realStack struct {
	env   Env
	kafka *devstack.Kafka
	topic string
}

func startRealStack(t *testing.T) *realStack {
	t.Helper()
	testenv.NeedsTemporal(t)
	ctx := context.Background()
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{UIPort: -1})
	if errors.Is(err, devstack.ErrTemporalBinaryMissing) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { tmp.Stop() })
	topic := fmt.Sprintf("pages-%d", rand.IntN(1e9))
	k, err := devstack.StartKafka("127.0.0.1:0", topic)
	require.NoError(t, err)
	t.Cleanup(k.Close)
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{})
	w, err := temporalnode.StartWorkers(tmp.Client(), temporalnode.WorkerConfig{Identity: "starter-test-worker", Activities: &activities.Activities{
		Schedulers: []string{sched.Addr()}, Token: session.DevToken, KafkaBrokers: k.Addr(), Identity: "starter-test-worker",
	}})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	return &realStack{
		env:   Env{Env: envconf.Env{TemporalAddress: tmp.Address(), TemporalNamespace: tmp.Namespace(), Schedulers: []string{sched.Addr()}}},
		kafka: k,
		topic: topic,
	}
}

// starter runs the starter as its main does (the real Temporal client,
// preflight, release and failure records) and returns its exit code, stdout and stderr.
func (s *realStack) starter(t *testing.T, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	app := &App{Env: s.env, Out: &out, Err: &errb, Dial: DialTemporal, Stats: sessiontest.CampaignStats,
		Preflight: Preflight, Release: sessiontest.ReleaseCampaign, Interval: 200 * time.Millisecond,
		Failures: func(ctx context.Context, addrs []string, token, id, reason string) ([]failure.Record, int, error) {
			return session.Client{Token: token}.Failures(ctx, addrs, id, reason)
		}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	code := app.Run(ctx, args)
	return code, out.String(), errb.String()
}

// TestStarterAgainstRealStack drives the starter binary's code against a
// real Temporal dev server, worker, scheduler and Kafka.
func TestStarterAgainstRealStack(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 200, Base: 61})
	s := startRealStack(t)

	// stop returns once the campaign has stopped, so that a start with the
	// same ID right after it is not refused as already running.
	t.Run("stop then start", func(t *testing.T) {
		id := fmt.Sprintf("stop-start-%d", rand.IntN(1e9))
		s.stopAtCleanup(t, id)
		start := append([]string{"start", "--id", id, "--allow-private", "--per-host-delay", "200ms",
			"--sink", "kafka://" + s.kafka.Addr() + "/" + s.topic}, seedArgs(web)...)
		code, out, errOut := s.starter(t, time.Minute, start...)
		require.Equal(t, ExitOK, code, "start: %s%s", out, errOut)
		s.waitFetched(t, id)

		began := time.Now()
		code, stopOut, errOut := s.starter(t, 3*time.Minute, "stop", id)
		tookStop := time.Since(began)
		require.Equal(t, ExitOK, code, "stop: %s%s", stopOut, errOut)
		assert.Contains(t, stopOut, "campaign "+id+" stopped (")

		code, out, errOut = s.starter(t, time.Minute, start...)
		tookBoth := time.Since(began)
		require.Equal(t, ExitOK, code, "start right after stop: %s%s", out, errOut)
		t.Logf("stop took %s, stop then start %s; stop said: %s", tookStop.Round(time.Millisecond),
			tookBoth.Round(time.Millisecond), strings.TrimSpace(stopOut))

		code, out, errOut = s.starter(t, 3*time.Minute, "stop", id)
		require.Equal(t, ExitOK, code, "second stop: %s%s", out, errOut)
	})

	// A sink whose Kafka topic does not exist: start --wait exits 1 at
	// once, naming the topic and the fix, and starts nothing (it used to
	// start, and wait for ever while the fetchers failed).
	t.Run("missing topic", func(t *testing.T) {
		id := fmt.Sprintf("missing-topic-%d", rand.IntN(1e9))
		s.stopAtCleanup(t, id)
		uri := "kafka://" + s.kafka.Addr() + "/some.topic"
		began := time.Now()
		code, out, errOut := s.starter(t, 30*time.Second, append([]string{"start", "--id", id, "--allow-private",
			"--sink", uri, "--wait"}, seedArgs(web)...)...)
		t.Logf("exit %d after %s; stderr:\n%s", code, time.Since(began).Round(time.Millisecond), errOut)
		require.Equal(t, ExitFailure, code, "stdout: %s", out)
		assert.Equal(t, "campaign "+id+" not started:\n  kafka sink "+uri+
			": topic \"some.topic\" does not exist; create it or add ?create=true to the sink URI\n", errOut)
		code, _, errOut = s.starter(t, 10*time.Second, "status", id)
		assert.Equal(t, ExitFailure, code)
		assert.Equal(t, "no campaign "+id+"\n", errOut, "a campaign was started")

		// With create=true the same start goes ahead and the topic is
		// created by the fetchers' sink.
		code, out, errOut = s.starter(t, 30*time.Second, append([]string{"start", "--id", id, "--allow-private",
			"--sink", uri + "?create=true&partitions=2", "--per-host-delay", "200ms"}, seedArgs(web)...)...)
		require.Equal(t, ExitOK, code, "start with create=true: %s%s", out, errOut)
		s.waitFetched(t, id)
		code, out, errOut = s.starter(t, 3*time.Minute, "stop", id)
		require.Equal(t, ExitOK, code, "stop: %s%s", out, errOut)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, sink.Check(ctx, uri, sink.Options{}), "the topic was not created")
	})

	t.Run("exclude and host", func(t *testing.T) { s.excludeAndHost(t, web) })
}

// TestStarterUnknownPolicy: a campaign naming a priority policy the
// scheduler does not have is refused before it starts, with the
// scheduler's reason; started anyway (--no-preflight, or by the temporal
// CLI), it fails visibly with the same reason instead of crawling in
// another order.
func TestStarterUnknownPolicy(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 5, Base: 62})
	s := startRealStack(t)
	id := fmt.Sprintf("unknown-policy-%d", rand.IntN(1e9))
	s.stopAtCleanup(t, id)
	start := append([]string{"start", "--id", id, "--allow-private", "--priority", "nosuch",
		"--sink", "kafka://" + s.kafka.Addr() + "/" + s.topic, "--wait"}, seedArgs(web)...)

	code, out, errOut := s.starter(t, 30*time.Second, start...)
	require.Equal(t, ExitFailure, code, "stdout: %s", out)
	assert.Equal(t, "campaign "+id+" not started:\n  scheduler "+s.env.Schedulers[0]+": priority \"nosuch\": unknown priority policy"+
		" (this scheduler has bfs, fair, score; a policy of your own goes in the scheduler's ServerConfig.Policies)\n", errOut)
	code, _, errOut = s.starter(t, 10*time.Second, "status", id)
	assert.Equal(t, ExitFailure, code)
	assert.Equal(t, "no campaign "+id+"\n", errOut, "a campaign was started")

	code, out, errOut = s.starter(t, time.Minute, append(start, "--no-preflight")...)
	t.Logf("--no-preflight: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, out+errOut, `priority "nosuch": unknown priority policy`)
	code, out, _ = s.starter(t, 10*time.Second, "status", id, "--json")
	require.Equal(t, ExitOK, code)
	var v View
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, "failed", v.State)
	assert.Equal(t, int64(0), v.PagesFetched)
}

// excludeAndHost: exclude and host steer a real campaign through the
// workflow's rules Update: the URLs the exclude matches that were queued
// become failures "excluded", a delay of 0 comes back as 0 (not left out)
// from the workflow, and a campaign that ended takes no rule.
func (s *realStack) excludeAndHost(t *testing.T, web *testweb.Web) {
	id := fmt.Sprintf("rules-%d", rand.IntN(1e9))
	s.stopAtCleanup(t, id)
	code, out, errOut := s.starter(t, time.Minute, append([]string{"start", "--id", id, "--allow-private", "--per-host-delay", "200ms",
		"--sink", "kafka://" + s.kafka.Addr() + "/" + s.topic}, seedArgs(web)...)...)
	require.Equal(t, ExitOK, code, "start: %s%s", out, errOut)
	s.waitFetched(t, id)

	odd := `/p/[0-9]*[13579]\.html$`
	code, out, errOut = s.starter(t, 3*time.Minute, "exclude", id, odd)
	require.Equal(t, ExitOK, code, "exclude: %s%s", out, errOut)
	assert.Equal(t, "campaign "+id+": excluding \""+odd+"\" (rules version 1; URLs it matches that were queued are settled as \"excluded\": starter failures "+
		id+" --reason excluded)\n", out)

	host, _, err := net.SplitHostPort(web.Hosts()[0])
	require.NoError(t, err)
	code, out, errOut = s.starter(t, 3*time.Minute, "host", id, host, "--delay", "0", "--concurrency", "2", "--json")
	require.Equal(t, ExitOK, code, "host: %s%s", out, errOut)
	var res workflows.RulesResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, workflows.RulesResult{Rules: campaign.Rules{Version: 2, Exclude: []string{odd},
		Hosts: []campaign.HostRule{{Host: host, Delay: new(time.Duration(0)), Concurrency: new(2)}}}}, res)

	matches := regexp.MustCompile(odd)
	await.For(t, time.Minute, 200*time.Millisecond, "URLs excluded", func() error {
		code, out, errOut := s.starter(t, 10*time.Second, "failures", id, "--reason", "excluded", "--json")
		var fl FailureList
		if code != ExitOK || json.Unmarshal([]byte(out), &fl) != nil || len(fl.Failures) == 0 {
			return fmt.Errorf("failures exited %d: %s%s", code, out, errOut)
		}
		t.Logf("%d URLs excluded, such as %s", len(fl.Failures), fl.Failures[0].URL)
		for _, f := range fl.Failures {
			assert.Regexp(t, matches, f.URL, "excluded, but the exclude does not match it")
		}
		return nil
	})

	code, out, errOut = s.starter(t, 3*time.Minute, "stop", id)
	require.Equal(t, ExitOK, code, "stop: %s%s", out, errOut)
	code, out, errOut = s.starter(t, time.Minute, "exclude", id, "/calendar/")
	assert.Equal(t, ExitFailure, code)
	assert.Empty(t, out)
	assert.Equal(t, "campaign "+id+" has ended (stopped); start it again with `starter start --id "+id+" ...`\n", errOut)
}

// stopAtCleanup stops campaign id, if it still runs when the test ends, so
// that a failed test leaves no queues in the machine's RabbitMQ.
func (s *realStack) stopAtCleanup(t *testing.T, id string) {
	t.Cleanup(func() { s.starter(t, 2*time.Minute, "stop", id) })
}

// waitFetched waits until campaign id has fetched a page.
func (s *realStack) waitFetched(t *testing.T, id string) {
	t.Helper()
	await.For(t, time.Minute, 200*time.Millisecond, "a page fetched", func() error {
		code, out, errs := s.starter(t, 10*time.Second, "status", id, "--json")
		var v View
		if code != ExitOK || json.Unmarshal([]byte(out), &v) != nil || v.PagesFetched == 0 {
			return fmt.Errorf("status exited %d: %s%s", code, out, errs)
		}
		return nil
	})
}

func seedArgs(web *testweb.Web) []string {
	var args []string
	for _, s := range web.Seeds() {
		args = append(args, "--seed", s)
	}
	return args
}
