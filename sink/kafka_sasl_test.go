package sink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	fplain "github.com/twmb/franz-go/pkg/sasl/plain"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/tlsconf/tlstest"
)

// Distinct passwords per mechanism, so that a wrong pairing fails.
const (
	saslPlainPass  = "plain-pw-8f3a"
	saslScram256Pw = "scram256-pw-51c2"
	saslScram512Pw = "scram512-pw-07de"
)

// TestKafkaSASL stores a page through a kafka:// sink that authenticates
// with each SASL mechanism against a kfake broker that requires SASL (one
// of them over TLS, trusting the CA of DROVER_TLS_CA), and reads it back
// with franz-go. A wrong password, a missing one, and no SASL at all are
// refused, in one line that never shows the password.
func TestKafkaSASL(t *testing.T) {
	pki := tlstest.New(t, "kafka")
	serverTLS, err := tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey}.Server()
	require.NoError(t, err)
	users := []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plainuser", saslPlainPass),
		kfake.Superuser("SCRAM-SHA-256", "scram256", saslScram256Pw),
		kfake.Superuser("SCRAM-SHA-512", "scram512", saslScram512Pw),
	}
	plainBroker := startKafka(t, append(users, kfake.SeedTopics(1, "pages"))...)
	tlsBroker := startKafka(t, append(users, kfake.SeedTopics(1, "pages"), kfake.TLS(serverTLS))...)
	trust, err := tlsconf.Options{CA: pki.CA}.ServiceTLS()
	require.NoError(t, err)

	for _, tc := range []struct {
		name, mech, user, pass string
		broker                 *kfake.Cluster
		tls                    bool
		read                   kgo.Opt
	}{
		{"plain", "plain", "plainuser", saslPlainPass, plainBroker, false,
			kgo.SASL(fplain.Auth{User: "plainuser", Pass: saslPlainPass}.AsMechanism())},
		{"scram-sha-256", "scram-sha-256", "scram256", saslScram256Pw, plainBroker, false,
			kgo.SASL(fscram.Auth{User: "scram256", Pass: saslScram256Pw}.AsSha256Mechanism())},
		{"scram-sha-512 over TLS", "scram-sha-512", "scram512", saslScram512Pw, tlsBroker, true,
			kgo.SASL(fscram.Auth{User: "scram512", Pass: saslScram512Pw}.AsSha512Mechanism())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			uri := fmt.Sprintf("kafka://%s@%s/pages?sasl=%s", tc.user, tc.broker.ListenAddrs()[0], tc.mech)
			readOpts := []kgo.Opt{tc.read}
			if tc.tls {
				uri += "&tls=true"
				readOpts = append(readOpts, kgo.DialTLSConfig(trust.Clone()))
			}
			opts := Options{Campaign: "c", BodyCap: testBodyCap, Secrets: Secrets{KafkaSASLPassword: tc.pass, TLS: trust}}
			require.NoError(t, Check(ctx, uri, opts), "preflight check with SASL")
			s, err := Open(ctx, uri, opts)
			require.NoError(t, err)
			page := testPages(t, 1)[0]
			page.URL = "http://sasl.test/" + tc.mech
			require.NoError(t, s.Store(ctx, page))
			require.NoError(t, s.Close())
			recs := readKafkaWith(t, tc.broker.ListenAddrs(), "pages", readOpts...)
			found := false
			for _, r := range recs {
				found = found || string(r.Key) == page.URL
			}
			require.True(t, found, "record %s not in the topic (%d records)", page.URL, len(recs))

			// The user name from the environment serves as well.
			envURI := strings.Replace(uri, tc.user+"@", "", 1)
			eopts := opts
			eopts.Secrets.KafkaSASLUsername = tc.user
			s, err = Open(ctx, envURI, eopts)
			require.NoError(t, err, "user name from KAFKA_SASL_USERNAME")
			require.NoError(t, s.Close())

			refused := func(what string, err error, want string) {
				t.Helper()
				require.Error(t, err, what)
				msg := err.Error()
				require.True(t, strings.Contains(msg, want), "%s: %q does not say %q", what, msg, want)
				require.True(t, !strings.Contains(msg, "\n"), "%s: not one line: %q", what, msg)
				for _, pw := range []string{saslPlainPass, saslScram256Pw, saslScram512Pw, "wrong-password-3b9e"} {
					require.True(t, !strings.Contains(msg, pw), "%s: the error shows a password: %q", what, msg)
				}
				t.Logf("%s: %s", what, msg)
			}
			wrong := opts
			wrong.Secrets.KafkaSASLPassword = "wrong-password-3b9e"
			start := time.Now()
			_, err = Open(ctx, uri, wrong)
			refused("wrong password", err, "SASL")
			require.True(t, time.Since(start) < 20*time.Second, "wrong password took %s", time.Since(start))
			none := opts
			none.Secrets.KafkaSASLPassword = ""
			_, err = Open(ctx, uri, none)
			refused("no password", err, "KAFKA_SASL_PASSWORD")
			noSASL := strings.Replace(strings.Replace(uri, tc.user+"@", "", 1), "sasl="+tc.mech, "create=false", 1)
			_, err = Open(ctx, noSASL, opts)
			require.Error(t, err, "a broker that requires SASL took a client without it")
			if tc.tls {
				_, err = Open(ctx, strings.Replace(uri, "&tls=true", "", 1), opts)
				require.Error(t, err, "a TLS broker took a plaintext client")
				untrusted := opts
				untrusted.Secrets.TLS = nil // the system's CAs, which do not hold the test CA
				_, err = Open(ctx, uri, untrusted)
				refused("untrusted broker certificate", err, "DROVER_TLS_CA")
			}
		})
	}
	_, err = Open(context.Background(), "kafka://u@127.0.0.1:1/pages?sasl=gssapi", Options{Secrets: Secrets{KafkaSASLPassword: "x"}})
	require.True(t, err != nil && strings.Contains(err.Error(), "plain, scram-sha-256, scram-sha-512"), "unknown mechanism: %v", err)
	_, err = Open(context.Background(), "kafka://u@127.0.0.1:1/pages", Options{})
	require.True(t, err != nil && strings.Contains(err.Error(), "needs sasl="), "user without sasl=: %v", err)
}

// readKafkaWith reads every record of topic with franz-go and opts.
func readKafkaWith(t testing.TB, brokers []string, topic string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(16 << 20)}, opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) == 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "no record read")
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		recs = append(recs, fs.Records()...)
	}
	return recs
}
