package sink

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestCheck: the starter's preflight asks Check whether each sink's service
// answers. A reachable one passes; an unreachable one is one line naming
// the service, the address tried and what to do; a sink that is local to
// the workers (warc:), or whose brokers are the workers' own, is not
// checked.
func TestCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	up := ln.Addr().String()
	down := freeAddr(t)
	// PostgreSQL listens on 127.0.0.1:5432 here; nothing listens on
	// 127.0.0.77, so a URI without a port there shows the default port.
	const pgUp = "127.0.0.1:5432"
	const noPG = "127.0.0.77"

	for _, tc := range []struct {
		uri, brokers string
		want         []string // substrings of the error; none: nil
	}{
		{uri: "warc:/nonexistent/dir"},
		{uri: "s3://bucket/pages"}, // Open refuses it; Check has nothing to dial
		{uri: "kafka://" + up + "/pages"},
		{uri: "kafka://" + down + "/pages",
			want: []string{"Kafka at " + down + " unreachable", "connection refused", "make dev", "--sink"}},
		{uri: "kafka://" + up + "," + down + "/pages",
			want: []string{"Kafka at " + down + " unreachable"}},
		// No brokers in the URI: the default brokers, when known here.
		{uri: "kafka:///pages", brokers: up},
		{uri: "kafka:///pages", brokers: down, want: []string{"Kafka at " + down + " unreachable"}},
		{uri: "kafka:///pages"}, // the workers' KAFKA_BROKERS: not known here
		{uri: "postgres://postgres@" + pgUp + "/test?sslmode=disable"},
		{uri: "postgresql://postgres@" + pgUp + "/test"},
		{uri: "postgres://postgres@127.0.0.1/test"}, // port 5432 by default
		{uri: "postgres:///test"},                   // 127.0.0.1:5432 by default
		{uri: "postgres://postgres@" + down + "/test",
			want: []string{"PostgreSQL at " + down + " unreachable", "connection refused", "pg_ctlcluster", "--sink"}},
		{uri: "postgres://postgres@" + noPG + "/test",
			want: []string{"PostgreSQL at " + noPG + ":5432 unreachable"}},
	} {
		name := tc.uri
		if tc.brokers != "" {
			name += " (brokers " + tc.brokers + ")"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := Check(ctx, tc.uri, tc.brokers)
			if len(tc.want) == 0 {
				require.NoError(t, err, tc.uri)
				return
			}
			for _, w := range tc.want {
				require.ErrorContains(t, err, w, tc.uri)
			}
			require.True(t, !strings.Contains(err.Error(), "\n"), "one line: %q", err)
		})
	}
}
