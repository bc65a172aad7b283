package tlsconf_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/tlsconf/tlstest"
)

func TestIsLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7420":    true,
		"127.10.0.3:7420":   true, // all of 127/8
		"[::1]:7420":        true,
		"localhost:7420":    true,
		"LOCALHOST:1":       true,
		"127.0.0.1":         true,
		":7420":             false, // every interface
		"0.0.0.0:7420":      false,
		"[::]:7420":         false,
		"10.0.0.5:7420":     false,
		"192.168.1.1:7420":  false,
		"scheduler:7420":    false, // a name: not known to be loopback
		"localhost.evil:1":  false,
		"128.0.0.1:7420":    false,
		"[::ffff:7f00:1]:1": true, // IPv4-mapped 127.0.0.1
	} {
		assert.Equalf(t, want, tlsconf.IsLoopbackAddr(addr), "IsLoopbackAddr(%q)", addr)
	}
}

func TestCheckListen(t *testing.T) {
	assert.NoError(t, tlsconf.CheckListen("127.0.0.1:7420", false, false), "plaintext on loopback")
	err := tlsconf.CheckListen("0.0.0.0:7420", false, false)
	if !errors.Is(err, tlsconf.ErrPlaintext) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "--tls-cert") || !strings.Contains(err.Error(), "DROVER_INSECURE_PLAINTEXT=1") {
		assert.Fail(t, fmt.Sprintf("plaintext on 0.0.0.0: %v", err))
	}
	assert.NoError(t, tlsconf.CheckListen(":7420", true, false), "TLS on every interface")
	assert.NoError(t, tlsconf.CheckListen(":7420", false, true), "plaintext allowed by --insecure-plaintext")
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"DROVER_TLS_CA": "/ca.pem", "DROVER_TLS_CERT": "/c.pem", "DROVER_TLS_KEY": "/k.pem",
		"DROVER_TLS_CLIENT_CA": "/cca.pem", "DROVER_TLS_SERVER_NAME": "sched", "DROVER_INSECURE_PLAINTEXT": "1",
		"DROVER_TLS": "true", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p",
	}
	got := tlsconf.FromEnv(func(k string) string { return env[k] })
	want := tlsconf.Options{CA: "/ca.pem", TLS: true, Cert: "/c.pem", Key: "/k.pem", ClientCA: "/cca.pem", ServerName: "sched",
		InsecurePlaintext: true, KafkaSASLUsername: "u", KafkaSASLPassword: "p"}
	assert.Equal(t, want, got, "FromEnv")
	assert.Equal(t, tlsconf.Options{}, tlsconf.FromEnv(func(string) string { return "" }), "empty environment")
	assert.False(t, tlsconf.FromEnv(func(k string) string { return map[string]string{"DROVER_INSECURE_PLAINTEXT": "0"}[k] }).InsecurePlaintext, "DROVER_INSECURE_PLAINTEXT=0 read as true")
}

func TestServerAndClientConfigs(t *testing.T) {
	pki := tlstest.New(t, "unit")
	// Nothing given: plaintext (nil), not an error.
	if c, err := (tlsconf.Options{}).Server(); c != nil || err != nil {
		assert.Fail(t, fmt.Sprintf("empty Server() = %v, %v", c, err))
	}
	if c, err := (tlsconf.Options{}).Client(); c != nil || err != nil {
		assert.Fail(t, fmt.Sprintf("empty Client() = %v, %v", c, err))
	}
	s, err := tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}.Server()
	if err != nil || s == nil || len(s.Certificates) != 1 || s.ClientAuth != tls.RequireAndVerifyClientCert || s.ClientCAs == nil {
		assert.Fail(t, fmt.Sprintf("mTLS Server() = %+v, %v", s, err))
	}
	s, err = tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey}.Server()
	if err != nil || s.ClientAuth != tls.NoClientCert {
		assert.Fail(t, fmt.Sprintf("TLS Server() without client CA: client auth %v, %v", s.ClientAuth, err))
	}
	c, err := tlsconf.Options{CA: pki.CA, ServerName: "sched"}.Client()
	if err != nil || c == nil || c.RootCAs == nil || c.ServerName != "sched" || len(c.Certificates) != 0 {
		assert.Fail(t, fmt.Sprintf("Client() = %+v, %v", c, err))
	}
	c, err = tlsconf.Options{TLS: true}.Client()
	if err != nil || c == nil || c.RootCAs != nil {
		assert.Fail(t, fmt.Sprintf("Client() with system roots = %+v, %v", c, err))
	}

	bad := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o600))
	for name, tc := range map[string]struct {
		o      tlsconf.Options
		server bool
		want   string
	}{
		"cert without key":     {tlsconf.Options{Cert: pki.ServerCert}, true, "--tls-key"},
		"key without cert":     {tlsconf.Options{Key: pki.ServerKey}, true, "--tls-cert"},
		"client CA alone":      {tlsconf.Options{ClientCA: pki.CA}, true, "--tls-client-ca"},
		"missing CA file":      {tlsconf.Options{CA: "/nonexistent/ca.pem"}, false, "--tls-ca"},
		"CA file without PEM":  {tlsconf.Options{CA: bad}, false, "no PEM certificate"},
		"client CA no PEM":     {tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: bad}, true, "--tls-client-ca"},
		"cert and key swapped": {tlsconf.Options{Cert: pki.ServerKey, Key: pki.ServerCert}, true, "TLS certificate"},
		"client cert no key":   {tlsconf.Options{CA: pki.CA, Cert: pki.ClientCert}, false, "--tls-key"},
	} {
		var err error
		if tc.server {
			_, err = tc.o.Server()
		} else {
			_, err = tc.o.Client()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			assert.Fail(t, fmt.Sprintf("%s: err = %v, want one line naming %q", name, err, tc.want))
		}
	}
	if c, err := (tlsconf.Options{CA: pki.CA}).AMQPTLS("amqp://guest:guest@127.0.0.1:5672/"); c != nil || err != nil {
		assert.Fail(t, fmt.Sprintf("AMQPTLS(amqp://) = %v, %v; want nil", c, err))
	}
	if c, err := (tlsconf.Options{CA: pki.CA}).AMQPTLS("amqps://u@rabbit:5671/"); c == nil || c.RootCAs == nil || err != nil {
		assert.Fail(t, fmt.Sprintf("AMQPTLS(amqps://) = %v, %v; want the CA", c, err))
	}
}
