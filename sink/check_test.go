package sink

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// topicExists asks the broker, with kafka-go's client, whether topic exists.
func topicExists(t *testing.T, addr, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := (&kafka.Client{Addr: kafka.TCP(addr)}).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	require.NoError(t, err)
	for _, tp := range md.Topics {
		if tp.Name == topic && tp.Error == nil && len(tp.Partitions) > 0 {
			return true
		}
	}
	return false
}

// TestCheckKafka: the preflight of a Kafka sink finds a missing topic (and
// says how to fix it), accepts create=true without creating anything,
// refuses options the sink would refuse, and checks the record limit.
func TestCheckKafka(t *testing.T) {
	c := startKafka(t, kfake.SeedTopics(2, "pages"))
	addr := c.ListenAddrs()[0]
	small, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "pages")) // message.max.bytes ~1 MB
	require.NoError(t, err)
	defer small.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := Options{BodyCap: testBodyCap}

	require.NoError(t, Check(ctx, "kafka://"+addr+"/pages", opts))
	require.NoError(t, Check(ctx, "kafka:///pages", Options{BodyCap: testBodyCap, KafkaBrokers: addr}), "the default brokers")
	require.NoError(t, Check(ctx, "kafka:///some.topic", Options{}), "no brokers known here: not checked")

	uri := "kafka://" + addr + "/some.topic"
	err = Check(ctx, uri, opts)
	require.ErrorIs(t, err, ErrTopicMissing)
	require.Equal(t, `kafka sink `+uri+`: topic "some.topic" does not exist; create it or add ?create=true to the sink URI`, fmt.Sprint(err))
	err = Check(ctx, "kafka:///some.topic", Options{KafkaBrokers: addr})
	require.ErrorContains(t, err, `kafka sink kafka:///some.topic: topic "some.topic" does not exist`)

	require.NoError(t, Check(ctx, uri+"?create=true&partitions=3", opts))
	require.True(t, !topicExists(t, addr, "some.topic"), "the check created the topic")
	err = Check(ctx, uri+"?create=true&replication=3", opts)
	require.ErrorContains(t, err, `kafka sink `+uri+`?create=true&replication=3: kafka `+addr+`: create topic "some.topic" (8 partitions, replication 3): `)
	require.True(t, !topicExists(t, addr, "some.topic"), "the check created the topic")

	for _, tc := range []struct{ query, want string }{
		{"?crate=true", `unknown option "crate"; a kafka:// URI takes compression, create, partitions, replication`},
		{"?create=yes", `create="yes": must be true or false`},
		{"?partitions=0", `partitions="0": must be between 1 and 10000`},
		{"?replication=x", `replication="x": must be between 1 and 100`},
		{"?compression=brotli", `compression "brotli": must be one of`},
	} {
		require.ErrorContains(t, Check(ctx, uri+tc.query, opts), tc.want, tc.query)
	}

	err = Check(ctx, "kafka://"+small.ListenAddrs()[0]+"/pages", opts)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	require.ErrorContains(t, err, "raise the broker's message.max.bytes")

	dead := freeAddr(t)
	err = Check(ctx, "kafka://"+dead+"/pages", opts)
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "kafka sink kafka://"+dead+"/pages: kafka "+dead+" unreachable")
}

func TestCheckWARC(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, Check(ctx, "warc:"+dir, Options{}))
	require.NoError(t, Check(ctx, "warc:"+filepath.Join(dir, "new", "deeper"), Options{}), "a worker creates it")
	_, err := os.Stat(filepath.Join(dir, "new"))
	require.True(t, os.IsNotExist(err), "the check created the directory")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the check left a file behind")

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err = Check(ctx, "warc:"+filepath.Join(file, "sub"), Options{})
	require.Equal(t, "warc sink warc:"+file+"/sub: "+file+" is not a directory; make warc:DIR a directory the workers can write, or pick another", fmt.Sprint(err))
}

func TestCheckPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table := testTable(t)
	require.NoError(t, Check(ctx, testPostgresURI+"&table="+url.QueryEscape(table), Options{}))
	conn, err := pgx.Connect(ctx, testPostgresURI)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists))
	require.True(t, !exists, "the check created the table")

	uri := testPostgresURI + "&table=no_such_schema_x.pages"
	err = Check(ctx, uri, Options{})
	require.ErrorContains(t, err, "postgres sink "+uri+": postgres 127.0.0.1:5432: cannot create table no_such_schema_x.pages: ")
	require.ErrorContains(t, err, `schema "no_such_schema_x" does not exist`)
	require.ErrorContains(t, err, "grant the workers' role CREATE on its schema, or pick another ?table=")

	dead := freeAddr(t)
	err = Check(ctx, "postgres://postgres@"+dead+"/test", Options{})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "postgres sink postgres://postgres@"+dead+"/test: postgres "+dead+" unreachable")
}
