package systest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/tlsconf/tlstest"
)

// TestNoSecretLeaks runs a campaign whose every secret is a distinct
// recognizable value: the AMQP password (a RabbitMQ user of its own), the
// session token (over TLS sessions), Kafka SASL credentials (SCRAM against
// a kfake broker that requires it), a PostgreSQL password (a role of its
// own; the local server trusts, so the password is sent to no one, but it
// is in the worker's and starter's environment) and a Temporal API key
// (through a TLS front to the dev server that refuses calls without it).
// The scheduler, worker and starter run as the binaries an operator runs.
// Each secret is shown to be used: the RabbitMQ user has a connection
// while the crawl runs, the Temporal front counts calls that carried the
// key (and refuses one without it), and pages land in Kafka and
// PostgreSQL. Then it scans every line the processes wrote, the
// scheduler's and worker's /metrics (mid-crawl and after), the campaign's
// Temporal history (whose first event holds the workflow's input: what the
// Web UI's input view shows), its description (summary, details, memo,
// search attributes) and `starter status --json` and `failures --json`,
// and fails naming where a secret was found.
func TestNoSecretLeaks(t *testing.T) {
	testenv.NeedsTemporal(t)
	rabbitmqctl := rabbitmqctlFor(t)
	n := rand.IntN(1e9)
	secrets := map[string]string{
		"AMQP password":           fmt.Sprintf("amqpPW-leakcheck-%d", n),
		"session token":           fmt.Sprintf("sessionTOKEN-leakcheck-%d", n),
		"Kafka SASL password":     fmt.Sprintf("kafkaSASL-leakcheck-%d", n),
		"PostgreSQL password":     fmt.Sprintf("pgPW-leakcheck-%d", n),
		"Temporal API key":        fmt.Sprintf("temporalKEY-leakcheck-%d", n),
		"refused sink's password": fmt.Sprintf("uriPW-leakcheck-%d", n),
	}
	ctx := context.Background()

	// RabbitMQ: a user of the test's own, with the password.
	amqpUser := fmt.Sprintf("leak-%d", n)
	rmqctl := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, rabbitmqctl, args...).CombinedOutput()
		require.NoError(t, err, "rabbitmqctl %s\n%s\n(rabbitmqctl needs root or the rabbitmq user; %s=1 skips this test outside CI)", strings.Join(args, " "), out, noRabbitmqctlEnv)
		return string(out)
	}
	rmqctl("add_user", amqpUser, secrets["AMQP password"])
	t.Cleanup(func() { exec.Command(rabbitmqctl, "delete_user", amqpUser).Run() })
	rmqctl("set_permissions", "-p", "/", amqpUser, ".*", ".*", ".*")
	amqpURL := fmt.Sprintf("amqp://%s:%s@127.0.0.1:5672/", amqpUser, secrets["AMQP password"])

	// PostgreSQL: a role with the password, owning the sink's table.
	pgRole := fmt.Sprintf("leak_%d", n)
	table := fmt.Sprintf("leak_pages_%d", n)
	pg, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	require.NoError(t, err, "PostgreSQL")
	defer pg.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", pgRole, secrets["PostgreSQL password"]),
		fmt.Sprintf("GRANT CREATE, USAGE ON SCHEMA public TO %s", pgRole),
	} {
		_, err := pg.Exec(ctx, q)
		require.NoError(t, err, "%s", strings.SplitN(q, " PASSWORD", 2)[0])
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		c.Exec(context.Background(), "DROP OWNED BY "+pgRole)
		c.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgRole)
	})

	// Kafka requiring SCRAM-SHA-256.
	kafkaUser, topic := "drover-sink", fmt.Sprintf("leak-pages-%d", n)
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", kafkaUser, secrets["Kafka SASL password"]),
		kfake.SeedTopics(1, topic), kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(8 << 20)}))
	require.NoError(t, err)
	t.Cleanup(kf.Close)
	kafkaAddr := kf.ListenAddrs()[0]

	// Temporal behind a TLS front, with an API key.
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{UIPort: -1})
	require.NoError(t, err)
	t.Cleanup(func() { tmp.Stop() })
	pki := tlstest.New(t, "leak")
	front, err := tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey}.Server()
	require.NoError(t, err)
	keyFront := startAPIKeyFront(t, front, tmp.Address(), secrets["Temporal API key"])
	temporalAddr := keyFront.addr
	// The front's check works: a client without the key is refused, a
	// configuration error the worker exits on.
	noKey := client.Options{HostPort: temporalAddr, Namespace: tmp.Namespace()}
	require.NoError(t, temporalnode.Secure(&noKey, tlsconf.Temporal{CA: pki.CA}))
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	if c, err := temporalnode.DialTemporal(dctx, noKey, nil); !errors.Is(err, temporalnode.ErrTemporalConfig) || keyFront.refused.Load() == 0 {
		if c != nil {
			c.Close()
		}
		require.FailNowf(t, "a Temporal client without the API key was not refused", "a Temporal client without the API key through the front: %v (%d calls refused), want a configuration error", err, keyFront.refused.Load())
	}

	// The scheduler over TLS, with the token and the AMQP password.
	bin := binaries(t)
	schedAddr, schedMetrics := freeAddr(t), freeAddr(t)
	sched := startProc(t, "scheduler", filepath.Join(bin, "scheduler"), []string{"-listen", schedAddr, "-seen", "mem", "-metrics-addr", schedMetrics},
		[]string{"DROVER_TOKEN=" + secrets["session token"], "AMQP_URL=" + amqpURL, "DROVER_TLS_CERT=" + pki.ServerCert, "DROVER_TLS_KEY=" + pki.ServerKey})
	clientTLS, err := tlsconf.Options{CA: pki.CA}.Client()
	require.NoError(t, err)
	sessions := session.Client{Token: secrets["session token"], TLS: clientTLS}
	await.For(t, 30*time.Second, 100*time.Millisecond, "the scheduler answering a control session over TLS", func() error {
		checkRunning(t, sched)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := sessions.DialControl(cctx, schedAddr)
		if err != nil {
			return err
		}
		return c.Close()
	})

	env := []string{
		"DROVER_SCHEDULER=" + schedAddr, "DROVER_TOKEN=" + secrets["session token"], "DROVER_TLS_CA=" + pki.CA,
		"TEMPORAL_ADDRESS=" + temporalAddr, "TEMPORAL_NAMESPACE=" + tmp.Namespace(), "TEMPORAL_TLS_CA=" + pki.CA,
		"TEMPORAL_API_KEY=" + secrets["Temporal API key"],
		"KAFKA_BROKERS=" + kafkaAddr, "KAFKA_SASL_USERNAME=" + kafkaUser, "KAFKA_SASL_PASSWORD=" + secrets["Kafka SASL password"],
		"PGPASSWORD=" + secrets["PostgreSQL password"],
	}
	workerMetrics := freeAddr(t)
	worker := startProc(t, "worker", filepath.Join(bin, "worker"), []string{"-identity", "leak-worker", "-metrics-addr", workerMetrics}, env)
	metricsURLs := map[string]string{"scheduler": "http://" + schedMetrics + metrics.Path, "worker": "http://" + workerMetrics + metrics.Path}

	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 15, CrossHost: true, Base: 133})
	id := fmt.Sprintf("leak-%d", n)
	kafkaSink := fmt.Sprintf("kafka://%s/%s?sasl=scram-sha-256", kafkaAddr, topic)
	pgSink := fmt.Sprintf("postgres://%s@127.0.0.1:5432/test?sslmode=disable&table=%s", pgRole, table)
	outputs := map[string]string{}
	// runStarter runs the starter binary (bounded) and returns its output
	// and exit code; it does not touch t, so a goroutine may call it.
	runStarter := func(args ...string) (string, int, error) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, filepath.Join(bin, "starter"), args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode(), nil
		}
		return string(out), 0, err
	}
	checkStarter := func(name string, wantCode int, out string, code int, err error) {
		t.Helper()
		outputs["starter "+name] = out
		require.NoError(t, err, "starter %s", name)
		require.Equal(t, wantCode, code, "starter %s: exit code:\n%s\n--- worker:\n%s", name, out, worker.Tail(30))
	}
	starter := func(name string, wantCode int, args ...string) string {
		t.Helper()
		out, code, err := runStarter(args...)
		checkStarter(name, wantCode, out, code, err)
		return out
	}
	// A sink URI with a password is refused before anything starts,
	// naming the variable to use, and without echoing the password.
	out := starter("start (password in sink URI)", 2, "start", "--id", id+"-refused", "--seed", web.Seeds()[0], "--allow-private",
		"--sink", fmt.Sprintf("postgres://%s:%s@127.0.0.1:5432/test", pgRole, secrets["refused sink's password"]))
	assert.Contains(t, out, "PGPASSWORD", "the refusal of a sink URI with a password does not name PGPASSWORD")
	args := []string{"start", "--id", id, "--allow-private", "--fetchers", "2", "--per-host-delay", "0", "--sink", kafkaSink, "--sink", pgSink, "--wait"}
	for _, s := range web.Seeds() {
		args = append(args, "--seed", s)
	}
	// Pages are held half-sent until both metrics endpoints show the
	// campaign and the RabbitMQ user's connection is seen: the crawl is
	// certainly under way then (the scheduler forgets a closed campaign's
	// series).
	web.HoldBodies()
	t.Cleanup(web.ReleaseBodies)
	type starterResult struct {
		out  string
		code int
		err  error
	}
	crawled := make(chan starterResult, 1)
	go func() {
		out, code, err := runStarter(args...)
		crawled <- starterResult{out, code, err}
	}()
	label := fmt.Sprintf("campaign=%q", id)
	await.For(t, 2*time.Minute, 100*time.Millisecond, "the campaign's series on both /metrics endpoints, pages held mid-crawl", func() error {
		select {
		case r := <-crawled:
			return fmt.Errorf("%w: starter start --wait ended (exit %d, %v) before the crawl was caught under way:\n%s", await.ErrFinal, r.code, r.err, r.out)
		default:
		}
		if web.Held() == 0 {
			return errors.New("no page held")
		}
		for name, u := range metricsURLs {
			body, err := getMetrics(u)
			if err != nil {
				return err
			}
			if !strings.Contains(body, label) {
				return fmt.Errorf("the %s's /metrics has no %s series", name, label)
			}
			outputs[name+" /metrics mid-crawl"] = body
		}
		return nil
	})
	// The scheduler's RabbitMQ connection is the test's user's: the AMQP
	// password was used.
	users := strings.Fields(rmqctl("-q", "list_connections", "--no-table-headers", "user"))
	assert.Contains(t, users, amqpUser, "no RabbitMQ connection of %s during the crawl; connections' users: %v", amqpUser, users)
	web.ReleaseBodies()
	r := <-crawled // bounded by runStarter's context
	checkStarter("start --wait", 0, r.out, r.code, r.err)
	for name, u := range metricsURLs {
		body, err := getMetrics(u)
		require.NoError(t, err, "%s /metrics after the crawl", name)
		outputs[name+" /metrics after the crawl"] = body
	}
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never fetched", "%d pages never fetched, e.g. %v", len(m), m[:min(3, len(m))])
	}
	starter("status --json", 0, "status", id, "--json")
	starter("failures --json", 0, "failures", id, "--json")
	starter("list", 0, "list")

	// Each secret was used: pages landed in Kafka (SASL) and in
	// PostgreSQL (the role), through TLS sessions (the token) of a
	// scheduler on RabbitMQ (the user, its connection seen above), and the
	// worker's and starter's calls to Temporal carried the API key (the
	// front refuses any call without it).
	assert.NotZero(t, keyFront.carried.Load(), "no Temporal call carried the API key")
	pages := len(web.Pages())
	var rows int
	if err := pg.QueryRow(ctx, "SELECT count(DISTINCT url) FROM "+table).Scan(&rows); assert.NoError(t, err, "PostgreSQL sink: its pages") {
		assert.GreaterOrEqual(t, rows, pages, "PostgreSQL sink: pages")
	}
	assert.GreaterOrEqual(t, countKafka(t, kafkaAddr, topic, kafkaUser, secrets["Kafka SASL password"], pages), pages, "Kafka sink: records")

	// What Temporal keeps: the history (the input is in its first event:
	// the Web UI's input view) and the description.
	c := tmp.Client()
	var hist bytes.Buffer
	it := c.GetWorkflowHistory(ctx, id, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		b, _ := proto.Marshal(ev) // strings and payload bytes appear as they are
		hist.Write(b)
		j, _ := protojson.Marshal(ev)
		hist.Write(j)
	}
	require.True(t, bytes.Contains(hist.Bytes(), []byte(kafkaSink)) && bytes.Contains(hist.Bytes(), []byte(pgRole)),
		"the history does not hold the campaign's input (its sinks): the scan would prove nothing")
	outputs["Temporal history"] = hist.String()
	if d, err := c.DescribeWorkflowExecution(ctx, id, ""); assert.NoError(t, err, "describe") {
		b, _ := proto.Marshal(d)
		outputs["Temporal description"] = string(b)
	}

	worker.Kill()
	sched.Kill()
	for name, p := range map[string]*devstack.Proc{"worker log": worker, "scheduler log": sched} {
		b, err := os.ReadFile(p.LogPath())
		require.NoError(t, err)
		require.NotEmpty(t, b, "%s is empty: the scan would prove nothing", name)
		outputs[name] = string(b)
	}
	for where, text := range outputs {
		for what, secret := range secrets {
			if i := strings.Index(text, secret); i >= 0 {
				line := text[strings.LastIndex(text[:i], "\n")+1:]
				if j := strings.IndexByte(line, '\n'); j >= 0 {
					line = line[:j]
				}
				assert.Failf(t, "a secret leaked", "the %s is in the %s: %.300q", what, where, line)
			}
		}
	}
	starters := 0
	for where := range outputs {
		if strings.HasPrefix(where, "starter ") {
			starters++
		}
	}
	t.Logf("scanned for %d secrets: %d bytes of worker log, %d of scheduler log, %d of history, %d and %d of the scheduler's and worker's /metrics mid-crawl, starter outputs of %d commands; %d Temporal calls carried the API key, %d without it refused",
		len(secrets), len(outputs["worker log"]), len(outputs["scheduler log"]), len(outputs["Temporal history"]),
		len(outputs["scheduler /metrics mid-crawl"]), len(outputs["worker /metrics mid-crawl"]), starters, keyFront.carried.Load(), keyFront.refused.Load())
}

// countKafka counts the records of topic, read with SCRAM-SHA-256.
func countKafka(t *testing.T, addr, topic, user, pass string, want int) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	for n < want && ctx.Err() == nil {
		n += len(cl.PollFetches(ctx).Records())
	}
	return n
}

// noRabbitmqctlEnv, set, skips TestNoSecretLeaks on a machine that cannot
// run rabbitmqctl; never in CI.
const noRabbitmqctlEnv = "DROVER_NO_RABBITMQCTL"

// rabbitmqctlFor finds rabbitmqctl (on PATH, or Debian's /usr/sbin, which
// a user's PATH may lack). Every machine that runs the node tests has
// RabbitMQ (.ci/run installs it), so a missing rabbitmqctl fails the test
// unless DROVER_NO_RABBITMQCTL opts out, which CI may not.
func rabbitmqctlFor(t *testing.T) string {
	t.Helper()
	testenv.NeedsRabbitMQ(t)
	const why = "the test makes a RabbitMQ user with a password of its own with rabbitmqctl, which needs root"
	if os.Getenv(noRabbitmqctlEnv) != "" {
		if os.Getenv("CI") != "" {
			require.FailNowf(t, "CI may not skip this test", "%s is set, and so is CI, which may not skip this test: %s", noRabbitmqctlEnv, why)
		}
		t.Skipf("skipped because %s is set: %s", noRabbitmqctlEnv, why)
	}
	if p, err := exec.LookPath("rabbitmqctl"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/rabbitmqctl"); err == nil {
		return "/usr/sbin/rabbitmqctl"
	}
	require.FailNowf(t, "rabbitmqctl not found", "rabbitmqctl not found on PATH or in /usr/sbin (apt-get install rabbitmq-server, as .ci/run does): %s; %s=1 skips this test outside CI", why, noRabbitmqctlEnv)
	return ""
}

// apiKeyFront is a TLS front for the Temporal dev server (which speaks no
// TLS) that checks Temporal's API key: it terminates TLS (HTTP/2 by ALPN,
// as gRPC wants), answers every call whose authorization header is not
// "Bearer " + the key with gRPC's Unauthenticated, and forwards the others
// to the dev server (HTTP/2 without TLS). It counts both.
type apiKeyFront struct {
	addr             string
	carried, refused atomic.Int64
}

func startAPIKeyFront(t *testing.T, cfg *tls.Config, backend, key string) *apiKeyFront {
	t.Helper()
	f := &apiKeyFront{}
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: backend}) },
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			grpcStatus(w, codes.Unavailable, "temporal front: "+err.Error())
		},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			f.refused.Add(1)
			grpcStatus(w, codes.Unauthenticated, "temporal front: no valid API key")
			return
		}
		f.carried.Add(1)
		proxy.ServeHTTP(w, r)
	})}
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.addr = ln.Addr().String()
	return f
}

// grpcStatus answers a gRPC call with a status and its message, and no
// body (a trailers-only response).
func grpcStatus(w http.ResponseWriter, code codes.Code, msg string) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", strconv.Itoa(int(code)))
	w.Header().Set("Grpc-Message", url.PathEscape(msg))
	w.WriteHeader(http.StatusOK)
}

// getMetrics reads a Prometheus endpoint, bounded.
func getMetrics(u string) (string, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return string(b), err
}
