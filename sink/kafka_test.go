package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startKafka starts an embedded Kafka-protocol broker on a free loopback port
// whose message.max.bytes allows a 1 MiB body cap.
func startKafka(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(4 << 20)}),
	}, opts...)
	c, err := kfake.NewCluster(opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// readKafka reads n records of topic with franz-go, a client independent of
// the sink's kafka-go.
func readKafka(t testing.TB, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records", len(recs), n)
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		recs = append(recs, fs.Records()...)
	}
	// Anything more would be a duplicate: poll briefly for it.
	extra, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	recs = append(recs, cl.PollFetches(extra).Records()...)
	return recs
}

func TestKafkaStoresEveryPageByteIdentical(t *testing.T) {
	for _, compression := range []string{"", "zstd"} {
		t.Run("compression="+compression, func(t *testing.T) {
			c := startKafka(t, kfake.SeedTopics(4, "pages"))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			k, err := NewKafka(ctx, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "pages", BodyCap: testBodyCap, Compression: compression})
			require.NoError(t, err)

			pages := testPages(t, 200)
			var wg sync.WaitGroup
			errs := make([]error, len(pages))
			for i, p := range pages {
				wg.Go(func() { errs[i] = k.Store(ctx, p) })
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			st := k.w.Stats()
			t.Logf("kafka-go: %d records in %d produce requests", st.Messages, st.Writes)
			require.Less(t, st.Writes, st.Messages, "concurrent Stores were not batched")
			require.NoError(t, k.Close())

			recs := readKafka(t, c.ListenAddrs(), "pages", len(pages))
			require.Len(t, recs, len(pages), "one record per page")
			want := byURL(pages)
			for _, r := range recs {
				p := want[string(r.Key)]
				require.NotNil(t, p, "unexpected key %q", r.Key)
				delete(want, string(r.Key))
				require.Equal(t, len(p.Body), len(r.Value), p.URL)
				require.True(t, string(p.Body) == string(r.Value), "body of %s differs", p.URL)
				h := map[string]string{}
				for _, kv := range r.Headers {
					h[kv.Key] = string(kv.Value)
				}
				wantH := map[string]string{
					"url": p.URL, "status": strconv.Itoa(p.Status), "content-type": p.ContentType,
					"content-encoding": p.ContentEncoding, "fetched-at": p.FetchedAt.Format(time.RFC3339Nano),
					"campaign": p.Campaign, "depth": strconv.Itoa(p.Depth), "parent": p.Parent, "ip": p.IP,
					"truncated": strconv.FormatBool(p.Truncated), "status-line": p.StatusLine, "http-headers": string(p.Header),
				}
				if p.Err != "" {
					wantH["error"] = p.Err
				}
				require.Equal(t, wantH, h, p.URL)
				require.True(t, r.Timestamp.Equal(p.FetchedAt.Truncate(time.Millisecond)), "timestamp of %s", p.URL)
			}
			require.Empty(t, want, "pages without a record")
		})
	}
}

func TestKafkaCreatesTopicOrRefusesMissingOne(t *testing.T) {
	c := startKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := NewKafka(ctx, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "missing"})
	require.ErrorContains(t, err, `topic "missing" does not exist; create it or add ?create=true to the sink URI`)
	require.ErrorIs(t, err, ErrTopicMissing)

	k, err := NewKafka(ctx, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "created", CreateTopic: true, Partitions: 3})
	require.NoError(t, err)
	p := testPages(t, 1)[0]
	require.NoError(t, k.Store(ctx, p))
	require.NoError(t, k.Close())
	recs := readKafka(t, c.ListenAddrs(), "created", 1)
	require.Len(t, recs, 1)
	require.Equal(t, p.URL, string(recs[0].Key))
}

func TestKafkaRefusesBrokerLimitBelowBodyCap(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "pages")) // default message.max.bytes ~1 MB
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = NewKafka(ctx, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "pages", BodyCap: testBodyCap})
	require.ErrorIs(t, err, ErrRecordTooLarge)
	require.ErrorContains(t, err, "message.max.bytes")
}

func TestKafkaUnreachable(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := NewKafka(ctx, KafkaConfig{Brokers: []string{addr}, Topic: "pages"})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "kafka "+addr+" unreachable")
	require.ErrorContains(t, err, "make dev")
}

// sinkOnBroker starts a broker with the topic "pages" in partitions and a
// Kafka sink on it that gives up closing after a second; ctx ends with the
// test, in 30 s at the most.
func sinkOnBroker(t *testing.T, partitions int32) (*kfake.Cluster, *Kafka, context.Context) {
	t.Helper()
	c := startKafka(t, kfake.SeedTopics(partitions, "pages"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	k, err := NewKafka(ctx, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "pages", CloseTimeout: time.Second})
	require.NoError(t, err)
	return c, k, ctx
}

func TestKafkaStoreFailsWhenBrokerGoes(t *testing.T) {
	c, k, ctx := sinkOnBroker(t, 2)
	defer k.Close()
	pages := testPages(t, 20)
	require.NoError(t, k.Store(ctx, pages[0]))
	addr := c.ListenAddrs()[0]
	c.Close()

	errs := make([]error, len(pages))
	var wg sync.WaitGroup
	for i, p := range pages[1:] {
		wg.Go(func() {
			sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
			defer scancel()
			errs[i] = k.Store(sctx, p)
		})
	}
	wg.Wait()
	for _, err := range errs[:len(pages)-1] {
		require.Error(t, err, "Store returned nil with the broker gone")
		require.ErrorContains(t, err, addr)
	}
}

func TestKafkaBlackholedProduceNeverAcks(t *testing.T) {
	// The broker takes the produce request and never answers: Store must
	// wait out its ctx and fail, never report the record durable.
	c, k, ctx := sinkOnBroker(t, 1)
	defer func() { require.Error(t, k.Close(), "Close reported the swallowed record flushed") }()
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // swallow every produce
	})
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	err := k.Store(sctx, testPages(t, 1)[0])
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePort(t))
}

// TestKafkaLingerSharesProduces stores pages 5 ms apart and counts the
// produce requests the broker saw: within one linger they share a request;
// with linger=0 each goes alone. The sink runs in a synctest bubble, whose
// clock moves only when every goroutine of the bubble is blocked, and not
// while one waits on the network (a produce on its way to the broker and
// back): the 5 ms steps and the linger are exact, and so are the counts.
// The default linger (20 ms) gives 9 or 10 requests, so each case fails
// when linger= is not applied; linger=0 fails as well when it becomes any
// wait of 5 ms or more.
func TestKafkaLingerSharesProduces(t *testing.T) {
	const pages = 40
	for _, tc := range []struct {
		linger   string
		produces int // produce requests for the pages
	}{
		{"500ms", 1},
		{"0", pages},
	} {
		t.Run("linger="+tc.linger, func(t *testing.T) {
			c := startKafka(t, kfake.SeedTopics(1, "pages"))
			var produces atomic.Int64
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				produces.Add(1)
				return nil, nil, false // counted, then handled as usual
			})
			addr, ps := c.ListenAddrs()[0], testPages(t, pages) // the broker stays outside the bubble
			// A wait on the network does not move the bubble's clock, so
			// a broker that never answered would hold the test: it is
			// closed after a minute of real time, which ends every wait.
			watchdog := time.AfterFunc(time.Minute, c.Close)
			defer watchdog.Stop()
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				s, err := Open(ctx, "kafka://"+addr+"/pages?linger="+tc.linger, Options{BodyCap: testBodyCap})
				require.NoError(t, err)
				defer func() {
					_ = s.Close()
					// A bubble must end with no goroutine of its own left.
					// After a Close that gave up (broker gone), kafka-go
					// retries on the bubble's clock and dials again.
					time.Sleep(time.Minute)
					s.(*Kafka).transport.CloseIdleConnections()
				}()
				errs := make([]error, len(ps))
				var wg sync.WaitGroup
				for i, p := range ps {
					wg.Go(func() { errs[i] = s.Store(ctx, p) })
					time.Sleep(5 * time.Millisecond) // on the bubble's clock
				}
				wg.Wait()
				require.NoError(t, errors.Join(errs...))
			})
			n := int(produces.Load())
			require.True(t, n == tc.produces, "%d pages in %d produce requests, want %d", pages, n, tc.produces)
			require.Equal(t, pages, len(readKafka(t, c.ListenAddrs(), "pages", pages)))
		})
	}
}
