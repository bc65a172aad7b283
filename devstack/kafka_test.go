package devstack

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
)

func TestKafkaRoundTripOneMiB(t *testing.T) {
	k, err := StartKafka("127.0.0.1:0", KafkaPagesTopic)
	require.NoError(t, err)
	defer k.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, CheckKafka(ctx, []string{k.Addr()}))

	body := bytes.Repeat([]byte("x"), 1<<20)
	w := &kafka.Writer{
		Addr:         kafka.TCP(k.Addr()),
		Topic:        KafkaPagesTopic,
		RequiredAcks: kafka.RequireAll,
		BatchBytes:   KafkaMaxMessageBytes,
		BatchTimeout: 10 * time.Millisecond,
	}
	defer w.Close()
	msg := kafka.Message{
		Key:   []byte("http://127.0.0.1/a"),
		Value: body,
		Headers: []kafka.Header{
			{Key: "content-type", Value: []byte("text/html")},
			{Key: "status", Value: []byte("200")},
		},
	}
	require.NoError(t, w.WriteMessages(ctx, msg))

	conn, err := kafka.DialContext(ctx, "tcp", k.Addr())
	require.NoError(t, err)
	parts, err := conn.ReadPartitions(KafkaPagesTopic)
	conn.Close()
	require.NoError(t, err)
	require.Len(t, parts, KafkaPartitions)

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:  []string{k.Addr()},
		Topic:    KafkaPagesTopic,
		GroupID:  "devstack-test",
		MaxBytes: KafkaMaxMessageBytes,
		MaxWait:  100 * time.Millisecond,
	})
	defer r.Close()
	got, err := r.FetchMessage(ctx)
	require.NoError(t, err)
	require.Equal(t, msg.Key, got.Key)
	require.True(t, bytes.Equal(body, got.Value), "body of %d bytes came back as %d bytes", len(body), len(got.Value))
	require.Len(t, got.Headers, 2)
	require.NoError(t, r.CommitMessages(ctx, got))
}

func TestStartKafkaHostAndPort(t *testing.T) {
	addr := freeAddr(t)
	k, err := StartKafka(addr)
	require.NoError(t, err)
	defer k.Close()
	require.Equal(t, addr, k.Addr())

	_, err = StartKafka(addr)
	var pe *PortInUseError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, err.Error(), "set KAFKA_BROKERS")
}

func TestCheckKafkaUnreachable(t *testing.T) {
	addr := freeAddr(t)
	err := CheckKafka(context.Background(), []string{addr})
	require.Error(t, err)
	require.Contains(t, err.Error(), "Kafka at "+addr+" unreachable")
	require.Contains(t, err.Error(), "make dev")
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
