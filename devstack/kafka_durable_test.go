package devstack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/testenv"
)

// produceAll writes n records (keys k0..k{n-1}, bodies of up to 64 KiB) to
// topic with acks=all, and returns the bodies by key.
func produceAll(t *testing.T, addr, topic string, n int) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := &kafka.Writer{
		Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll,
		Balancer: &kafka.Hash{}, BatchBytes: KafkaMaxMessageBytes, BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	want := map[string][]byte{}
	var msgs []kafka.Message
	for i := range n {
		key := fmt.Sprintf("k%d", i)
		body := bytes.Repeat([]byte{byte('a' + i%26)}, 1+(i*997)%(64<<10))
		want[key] = body
		msgs = append(msgs, kafka.Message{Key: []byte(key), Value: body})
	}
	require.NoError(t, w.WriteMessages(ctx, msgs...))
	return want
}

// readAll reads every record of every partition of topic.
func readAll(t *testing.T, addr, topic string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := ReadTopic(ctx, addr, topic)
	require.NoError(t, err)
	for _, m := range msgs {
		got[string(m.Key)] = m.Value
	}
	return got
}

func requireSame(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	missing := 0
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			missing++
		}
	}
	require.Zero(t, missing, "%d of %d acked records not read back (read %d)", missing, len(want), len(got))
}

// The dev stack's Kafka keeps what it acknowledged across a stop
// and a start on the same directory.
func TestKafkaDataDirSurvivesRestart(t *testing.T) {
	testenv.Slow(t) // an fsync per produce
	dir := t.TempDir()
	k, err := StartKafkaWith(KafkaOptions{Addr: "127.0.0.1:0", DataDir: dir, Topics: []string{KafkaPagesTopic}})
	require.NoError(t, err)
	want := produceAll(t, k.Addr(), KafkaPagesTopic, 500)
	k.Close()

	k, err = StartKafkaWith(KafkaOptions{Addr: "127.0.0.1:0", DataDir: dir, Topics: []string{KafkaPagesTopic}})
	require.NoError(t, err)
	defer k.Close()
	requireSame(t, want, readAll(t, k.Addr(), KafkaPagesTopic))
}

// A broker that dies without Close (SIGKILL) leaves only what it wrote as
// it went: a copy of its directory taken while it still runs, never closed,
// must serve every acknowledged record.
func TestKafkaDataDirWithoutClose(t *testing.T) {
	testenv.Slow(t) // an fsync per produce
	dir := t.TempDir()
	k, err := StartKafkaWith(KafkaOptions{Addr: "127.0.0.1:0", DataDir: dir, Topics: []string{KafkaPagesTopic}})
	require.NoError(t, err)
	defer k.Close()
	want := produceAll(t, k.Addr(), KafkaPagesTopic, 300)

	crashed := filepath.Join(t.TempDir(), "kafka")
	require.NoError(t, os.CopyFS(crashed, os.DirFS(dir)))
	k2, err := StartKafkaWith(KafkaOptions{Addr: "127.0.0.1:0", DataDir: crashed, Topics: []string{KafkaPagesTopic}})
	require.NoError(t, err)
	defer k2.Close()
	requireSame(t, want, readAll(t, k2.Addr(), KafkaPagesTopic))
}

// A directory written before a topic was added to the stack gets it.
func TestKafkaDataDirAddsTopics(t *testing.T) {
	dir := t.TempDir()
	k, err := StartKafkaWith(KafkaOptions{Addr: "127.0.0.1:0", DataDir: dir})
	require.NoError(t, err)
	k.Close()
	k, err = StartKafkaWith(KafkaOptions{Addr: "127.0.0.1:0", DataDir: dir, Topics: []string{KafkaPagesTopic}})
	require.NoError(t, err)
	defer k.Close()
	conn, err := kafka.Dial("tcp", k.Addr())
	require.NoError(t, err)
	defer conn.Close()
	parts, err := conn.ReadPartitions(KafkaPagesTopic)
	require.NoError(t, err)
	require.Len(t, parts, KafkaPartitions)
}
