package sink

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOpenRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ uri, want string }{
		{"postgres://postgres:secret@127.0.0.1:5432/test", "must not carry a password"},
		{"postgres://127.0.0.1:5432/test?password=secret", "must not carry a password"},
		{"kafka://u:secret@127.0.0.1:9092/pages", "must not carry a password"},
		{"kafka://u:secret@127.0.0.1:9092/pages?sasl=plain", "set KAFKA_SASL_PASSWORD in the workers' environment"},
		{"postgres://u:secret@127.0.0.1:5432/test", "set PGPASSWORD (or PGPASSFILE) in the workers' environment"},
		{"kafka://127.0.0.1:9092/pages?sasl=plain&password=secret", "set KAFKA_SASL_PASSWORD"},
		{"kafka://127.0.0.1:9092/pages?tls=maybe", "tls="},
		{"s3://bucket/pages", "unknown kind"},
		{"kafka://127.0.0.1:9092", "must be kafka://HOST:PORT/TOPIC"},
		{"warc:", "needs a directory"},
		{"kafka://127.0.0.1:9092/pages?compression=brotli", "compression"},
		{"kafka://127.0.0.1:9092/pages?create=maybe", "create="},
		{"kafka://127.0.0.1:9092/pages?linger=soon", "linger=\"soon\": must be a duration from 0 to 10s"},
		{"kafka://127.0.0.1:9092/pages?linger=-1ms", "linger="},
		{"kafka://127.0.0.1:9092/pages?linger=11s", "linger="},
		{"kafka://127.0.0.1:9092/pages?linger=20", "linger="},
		{"kafka://127.0.0.1:9092/pages?max_body=1023", "max_body=\"1023\": must be a number of bytes from 1024 to 1073741824"},
		{"kafka://127.0.0.1:9092/pages?max_body=1MiB", "max_body="},
		{"postgres://127.0.0.1:5432/test?max_body=0", "max_body=\"0\": must be a number of bytes"},
	} {
		s, err := Open(ctx, tc.uri, Options{})
		require.ErrorContains(t, err, tc.want, tc.uri)
		require.True(t, !strings.Contains(err.Error(), "secret"), "%s: the error shows the password: %v", tc.uri, err)
		require.True(t, s == nil, tc.uri)
	}
}

func TestOpenUnreachableNamesAddressAndRemedy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := freeAddr(t)
	_, err := Open(ctx, "kafka://"+addr+"/pages", Options{})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "kafka "+addr+" unreachable: ")
	require.ErrorContains(t, err, "connection refused (start the dev stack with `make dev`, or set KAFKA_BROKERS)")

	_, err = Open(ctx, "postgres://postgres@"+addr+"/test", Options{})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "postgres "+addr+" unreachable")
}

// TestOpenAllStoresInEverySink opens all three real sinks through their
// URIs and checks that a Multi reaches each.
func TestOpenAllStoresInEverySink(t *testing.T) {
	c := startKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	table := testTable(t)
	uris := []string{
		"kafka://" + c.ListenAddrs()[0] + "/multi?create=true&partitions=2&compression=lz4",
		"warc:" + dir,
		testPostgresURI + "&table=" + url.QueryEscape(table),
	}
	s, err := OpenAll(ctx, uris, Options{Campaign: "camp-1", BodyCap: testBodyCap})
	require.NoError(t, err)
	m, ok := s.(Multi)
	require.True(t, ok, "OpenAll of 3 URIs gave %T", s)
	require.Len(t, m, 3)
	pages := testPages(t, 30)
	storeAll(t, m, pages)
	require.NoError(t, m.Close())

	require.Len(t, readKafka(t, c.ListenAddrs(), "multi", len(pages)), len(pages))
	_, recs := readWARCs(t, dir)
	n := 0
	for _, r := range recs {
		if r.typ == "metadata" {
			n++
		}
	}
	require.Equal(t, len(pages), n, "WARC metadata records")
	pg := newTestPostgres(t, table)
	defer pg.Close()
	var rows int
	require.NoError(t, pg.conns[0].QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&rows))
	require.Equal(t, len(pages), rows, "PostgreSQL rows")
}

func TestMultiFailsIfAnySinkFails(t *testing.T) {
	good, bad := NewMemory(), NewMemory()
	bad.FailWith(errors.New("disk full"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := Multi{good, bad}.Store(ctx, testPages(t, 1)[0])
	require.ErrorContains(t, err, "disk full")
	require.Len(t, good.Pages(), 1)
	require.Len(t, bad.Pages(), 0)
}

func TestOpenAllClosesOpenedOnFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := OpenAll(ctx, []string{"warc:" + t.TempDir(), "kafka://" + freeAddr(t) + "/x"}, Options{})
	require.ErrorIs(t, err, ErrUnreachable)
}
