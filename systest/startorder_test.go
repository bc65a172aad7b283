package systest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// temporalLateBy is how long after the worker the Temporal server starts,
// paced on purpose: several of the worker's dial attempts must fail first,
// so that the test sees it wait rather than win a race.
const temporalLateBy = 3 * time.Second

// Start order: a worker process started before the Temporal
// server answers waits for it, saying so, and runs a campaign once the
// server is up; a worker with a malformed address or a namespace the
// server does not have exits and says why.
func TestWorkerStartedBeforeTemporal(t *testing.T) {
	testenv.NeedsTemporal(t)
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 60, Base: 71})
	topic := fmt.Sprintf("pages-%d", rand.IntN(1e9))
	k, err := devstack.StartKafka("127.0.0.1:0", topic)
	require.NoError(t, err)
	defer k.Close()
	sc := frontier.DefaultServerConfig()
	sc.Token = testToken
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{Server: sc})

	temporalAddr := freeAddr(t)
	w := startWorkerProc(t, "early-worker", []string{sched.Addr()}, temporalAddr, k.Addr())
	await.For(t, 30*time.Second, 100*time.Millisecond, "the worker saying it waits for Temporal", func() error {
		if !w.Alive() {
			require.FailNowf(t, "the worker exited", "the worker exited before Temporal was up (%v):\n%s", w.Err(), w.Tail(20))
		}
		if !strings.Contains(w.Tail(50), "waiting for Temporal") {
			return fmt.Errorf("the worker has not said it waits for Temporal")
		}
		return nil
	})
	time.Sleep(temporalLateBy)
	host, port, _ := net.SplitHostPort(temporalAddr)
	p, _ := strconv.Atoi(port)
	tmp, err := devstack.StartTemporal(context.Background(), devstack.TemporalOptions{IP: host, Port: p, UIPort: -1})
	require.NoError(t, err)
	defer tmp.Stop()

	cfg := campaign.Config{
		ID: fmt.Sprintf("start-order-%d", rand.IntN(1e9)), Seeds: web.Seeds(), Fetchers: 2,
		PerHostDelay: new(5 * time.Millisecond), AllowPrivate: true,
		Sinks: []string{"kafka://" + k.Addr() + "/" + topic},
	}
	runCampaign(t, tmp.Client(), cfg, 3*time.Minute)()
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never fetched", "%d pages never fetched, e.g. %v", len(m), m[:min(3, len(m))])
	}

	for _, tc := range []struct{ name, addr, namespace, want string }{
		{"no-port", "127.0.0.1", "default", "is not HOST:PORT"},
		{"no-namespace", tmp.Address(), "no-such-namespace", `has no namespace "no-such-namespace"`},
	} {
		p := startProc(t, tc.name, filepath.Join(binaries(t), "worker"), []string{"-identity", tc.name, "-metrics-addr", "127.0.0.1:0"}, []string{
			"DROVER_SCHEDULER=" + sched.Addr(), "DROVER_TOKEN=" + testToken,
			"TEMPORAL_ADDRESS=" + tc.addr, "TEMPORAL_NAMESPACE=" + tc.namespace, "KAFKA_BROKERS=" + k.Addr(),
		})
		await.For(t, 60*time.Second, 100*time.Millisecond, tc.name+": the worker exiting on a configuration error", func() error {
			if p.Alive() {
				return fmt.Errorf("still running; its log ends:\n%s", p.Tail(20))
			}
			return nil
		})
		assert.Error(t, p.Err(), "%s: the worker exited 0", tc.name)
		assert.Contains(t, p.Tail(20), tc.want, "%s: the worker's last words lack it", tc.name)
	}
}
