package systest_test

// Seeds from lists, through the starter binary: a campaign started with
// --seeds-file (gzip) fetches every seed once; `starter seed` refuses a
// seed out of scope loudly, takes it once `starter include` widened the
// scope, and streams a list served over HTTP through the workflow's
// SeedFile activity. The workflow's input carries no seed, and no event of
// its history is 64 KB or more.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxEventBytes is the bound on every event of a campaign's history.
const maxEventBytes = 64 << 10

// gzipList writes urls, one a line, gzip-compressed, to a file in dir.
func gzipList(t *testing.T, dir, name string, urls []string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	fmt.Fprintln(zw, "# seeds")
	for _, u := range urls {
		fmt.Fprintln(zw, u)
	}
	require.NoError(t, zw.Close())
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	return path
}

// largestEvent is the size of the largest event of h, and its type.
func largestEvent(h *historypb.History) (int, string) {
	n, what := 0, ""
	for _, ev := range h.Events {
		if s := proto.Size(ev); s > n {
			n, what = s, ev.GetEventType().String()
		}
	}
	return n, what
}

// startedConfig is the config in the history's first event: the input.
func startedConfig(t *testing.T, h *historypb.History) (campaign.Config, int) {
	t.Helper()
	in := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput()
	var ci workflows.CampaignInput
	require.NoError(t, json.Unmarshal(in.GetPayloads()[0].GetData(), &ci))
	return ci.Config, proto.Size(in)
}

func seedUpdates(h *historypb.History) int {
	n := 0
	for _, ev := range h.Events {
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == workflows.UpdateSeed {
			n++
		}
	}
	return n
}

func TestSeedListsIncludeAndSeedOverHTTP(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 150, NoExtras: true, Base: 147})
	s := startStack(t)
	starter := starterRunner(t, s.services, []string{s.sched.Addr()})
	dir := t.TempDir()
	hosts := web.Hosts()
	var first, third []string // the pages of hosts 0 and 1; of host 2
	for _, u := range web.Pages() {
		if strings.Contains(u, "//"+hosts[2]+"/") {
			third = append(third, u)
		} else {
			first = append(first, u)
		}
	}
	id := fmt.Sprintf("seeds-%d", time.Now().UnixNano())
	out, err := starter(time.Minute, "start", "--id", id, "--seeds-file", gzipList(t, dir, "seeds.gz", first),
		"--fetchers", "2", "--allow-private", "--per-host-delay", "20ms", "--no-preflight",
		"--sink", "kafka://"+s.kafka.Addr()+"/"+s.topic)
	require.NoError(t, err, "start:\n%s", out)
	t.Logf("start: %s", out)
	awaitRequests(t, web, 50)

	// Host 2 is not among the seeds' hosts: its root is refused, loudly.
	one := filepath.Join(dir, "one.txt")
	require.NoError(t, os.WriteFile(one, []byte(web.Seeds()[2]+"\n"), 0o644))
	out, err = starter(time.Minute, "seed", id, "--file", one)
	require.Error(t, err, "seed out of scope: want exit 1 naming the refused seed:\n%s", out)
	require.Contains(t, out, "1 refused by the scope", "seed out of scope: want exit 1 naming the refused seed")
	require.Contains(t, out, "out of scope", "seed out of scope: want exit 1 naming the refused seed")
	// The include comes while requests are under way, their bodies held:
	// the fetcher sessions take it running (the schedulers push it), so
	// that no request is cut and made again.
	web.HoldBodies()
	t.Cleanup(web.ReleaseBodies)
	await.For(t, time.Minute, 10*time.Millisecond, "requests held under way", func() error {
		if n := web.Held(); n < 2 {
			return fmt.Errorf("%d held", n)
		}
		return nil
	})
	held := web.Held()
	out, err = starter(time.Minute, "include", id, "^"+regexp.QuoteMeta("http://"+hosts[2]+"/"))
	require.NoError(t, err, "include:\n%s", out)
	// A session restarted for the include would cut its requests within
	// moments (FrameEnd follows the Update at once): they stay held.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		n := web.Held()
		require.GreaterOrEqual(t, n, held, "%d of the %d requests under way at the include were cut", held-n, held)
	}
	web.ReleaseBodies()
	t.Logf("%d requests under way at the include, still under way 2 s later", held)
	out, err = starter(time.Minute, "seed", id, "--file", one)
	require.NoError(t, err, "seed after include:\n%s", out)
	require.Contains(t, out, "1 seeds queued", "seed after include")
	// The rest of host 2 from a list served over HTTP: the workflow
	// streams it (SeedFile); some of it was queued already as links.
	list, err := os.ReadFile(gzipList(t, dir, "third.gz", third))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(list) }))
	defer srv.Close()
	out, err = starter(time.Minute, "seed", id, "--file", srv.URL+"/third.gz", "--json")
	require.NoError(t, err, "seed over HTTP:\n%s", out)
	var res workflows.SeedFileResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), "seed --json:\n%s", out)
	c := res.Counts
	assert.Equal(t, int64(len(third)), c.Seeded+c.Known, "seed over HTTP: %+v: seeded or known", c)
	assert.Zero(t, c.Invalid+c.Refused, "seed over HTTP: %+v: invalid or refused", c)
	// The same list from the temporal CLI: the Update is the command.
	ctTemporalCLI(t, s, "workflow", "update", "execute", "--workflow-id", id, "--name", workflows.UpdateSeed,
		"--input", fmt.Sprintf(`{"source": %q}`, srv.URL+"/third.gz"))

	var final workflows.Status
	await.For(t, 6*time.Minute, 200*time.Millisecond, "the campaign's end", func() error {
		st, err := ctQueryStatus(t, s.temporal.Client(), id)
		if err != nil || st.State != campaign.StateCompleted {
			return fmt.Errorf("state %q, %v", st.State, err)
		}
		final = st
		return nil
	})
	// The CLI's list came after the starter's: every seed of it known.
	assert.Equal(t, res.SeedsAdded, final.SeedsAdded, "status: seeds added, against the starter's last seed update")
	assert.Equal(t, 1+res.Counts.Seeded, final.SeedsAdded, "status: seeds added, against the lists' 1 + %d queued", res.Counts.Seeded)
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, such as %s", len(m), m[0])
	}
	assert.Empty(t, web.Duplicates(), "requested more than once")
	h := ctCheckHistory(t, s.temporal.Client(), id, "", "")
	cfg, inBytes := startedConfig(t, h)
	assert.Empty(t, cfg.Seeds, "the input's seeds: want no seed")
	assert.NotEmpty(t, cfg.SeedsFile, "the input's seeds_file: want the list's name")
	assert.Len(t, cfg.SeedHosts, 2, "the input's seed hosts")
	n, what := largestEvent(h)
	t.Logf("%d pages requested; input %d bytes; largest event %d bytes (%s); %d seed updates; %s",
		web.Total(), inBytes, n, what, seedUpdates(h), strings.TrimSpace(out))
	assert.Less(t, n, maxEventBytes, "largest event (%s), bytes", what)
	assert.Equal(t, 4, seedUpdates(h), "seed updates in the history (the refused list, the same list again, the HTTP list from the starter and from the temporal CLI)")
}
