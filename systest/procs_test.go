package systest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/require"
)

// The scheduler and worker binaries, built once per test binary into binDir
// (removed by TestMain).
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds ./scheduler, ./worker and ./starter (without -race: they are the
// processes under test, not the test) and returns their directory. The
// build is slow (18 s here with a warm cache, under load): it skips the
// test under -short.
func binaries(t *testing.T) string {
	t.Helper()
	testenv.Slow(t)
	binOnce.Do(func() {
		root, err := devstack.RepoRoot(".")
		if err != nil {
			binErr = err
			return
		}
		if binDir, err = os.MkdirTemp("", "drover-bin-"); err != nil {
			binErr = err
			return
		}
		binErr = devstack.Build(context.Background(), root, binDir, "scheduler", "worker", "starter")
	})
	require.NoError(t, binErr)
	return binDir
}

// testToken is the DROVER_TOKEN of the processes a test starts.
const testToken = "drover-scale-test-token"

// freeAddr returns a loopback address with a port that nothing listens on
// and that the kernel keeps out of its own choices for a minute
// (devstack.FreeAddr), for a process the test starts later.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := devstack.FreeAddr("127.0.0.1")
	require.NoError(t, err)
	return addr
}

// startProc starts bin with args and the current environment plus env, its
// output in a log file whose tail is printed when the test fails; it is
// SIGKILLed at the end of the test.
func startProc(t *testing.T, name, bin string, args, env []string) *devstack.Proc {
	t.Helper()
	p, err := devstack.StartProc(devstack.ProcSpec{Name: name, Path: bin, Args: args, Env: env}, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- tail of %s (%s):\n%s", name, p.LogPath(), p.Tail(40))
		}
	})
	return p
}

// checkRunning fails the test if p has exited: a process that was to keep
// running, checked while waiting for it to be ready.
func checkRunning(t *testing.T, p *devstack.Proc) {
	t.Helper()
	if !p.Alive() {
		require.FailNowf(t, "process exited", "%s exited (%v):\n%s", p.Name(), p.Err(), p.Tail(20))
	}
}

// startSchedulerProc runs the scheduler binary as replica index of replicas
// on addr with the seen-set file seen, and waits until it answers a control
// session.
func startSchedulerProc(t *testing.T, addr string, index, replicas int, seen string) *devstack.Proc {
	t.Helper()
	name := fmt.Sprintf("scheduler-%d", index)
	p := startProc(t, name, filepath.Join(binaries(t), "scheduler"),
		[]string{"-listen", addr, "-index", fmt.Sprint(index), "-replicas", fmt.Sprint(replicas), "-seen", seen, "-name", name, "-metrics-addr", "127.0.0.1:0"},
		[]string{"DROVER_TOKEN=" + testToken, "AMQP_URL=" + amqpURL()})
	await.For(t, 20*time.Second, 50*time.Millisecond, name+" answering a control session", func() error {
		checkRunning(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := session.Client{Token: testToken}.DialControl(ctx, addr)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return p
}

// startWorkerProc runs the worker binary against the given schedulers,
// Temporal and Kafka.
func startWorkerProc(t *testing.T, identity string, schedulers []string, temporal, kafka string) *devstack.Proc {
	t.Helper()
	return startProc(t, identity, filepath.Join(binaries(t), "worker"),
		[]string{"-identity", identity, "-metrics-addr", "127.0.0.1:0"},
		[]string{
			"DROVER_SCHEDULER=" + strings.Join(schedulers, ","),
			"DROVER_TOKEN=" + testToken,
			"TEMPORAL_ADDRESS=" + temporal,
			"KAFKA_BROKERS=" + kafka,
		})
}

// services are what process tests share: a Temporal dev server and an
// in-memory Kafka with a topic of the test's own.
type services struct {
	temporal *devstack.Temporal
	kafka    *devstack.Kafka
	topic    string
}

func startServices(t *testing.T) *services {
	t.Helper()
	return startServicesWith(t, devstack.TemporalOptions{UIPort: -1})
}

func startServicesWith(t *testing.T, topts devstack.TemporalOptions) *services {
	t.Helper()
	tmp := startTemporal(t, topts)
	topic := fmt.Sprintf("pages-%d", rand.IntN(1e9))
	k, err := devstack.StartKafka("127.0.0.1:0", topic)
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return &services{temporal: tmp, kafka: k, topic: topic}
}

// newCampaign is a campaign named prefix-N of web's seeds with fetchers
// fetchers, loopback allowed, storing its pages in the services' topic.
func (s *services) newCampaign(prefix string, web *testweb.Web, fetchers int) campaign.Config {
	return campaign.Config{
		ID:           fmt.Sprintf("%s-%d", prefix, rand.IntN(1e9)),
		Seeds:        web.Seeds(),
		Fetchers:     fetchers,
		AllowPrivate: true,
		Sinks:        []string{"kafka://" + s.kafka.Addr() + "/" + s.topic},
	}
}

// startTemporal starts a Temporal dev server, stopped at the end of the
// test; it skips the test under -short.
func startTemporal(t *testing.T, opts devstack.TemporalOptions) *devstack.Temporal {
	t.Helper()
	testenv.NeedsTemporal(t)
	tmp, err := devstack.StartTemporal(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { tmp.Stop() })
	return tmp
}

// runCampaign starts cfg's campaign and returns a func that waits (at most
// wait) for it to end and returns its final status.
func runCampaign(t *testing.T, c client.Client, cfg campaign.Config, wait time.Duration) func() workflows.Status {
	t.Helper()
	run := ctStartCampaign(t, c, cfg)
	return func() workflows.Status {
		t.Helper()
		st := ctResult(t, run, wait)
		require.Equal(t, campaign.StateCompleted, st.State, "campaign %s: state (%s)", cfg.ID, st.Reason)
		return st
	}
}
