package tlsconf_test

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

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
		if got := tlsconf.IsLoopbackAddr(addr); got != want {
			t.Errorf("IsLoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestCheckListen(t *testing.T) {
	if err := tlsconf.CheckListen("127.0.0.1:7420", false, false); err != nil {
		t.Errorf("plaintext on loopback: %v", err)
	}
	err := tlsconf.CheckListen("0.0.0.0:7420", false, false)
	if !errors.Is(err, tlsconf.ErrPlaintext) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "--tls-cert") || !strings.Contains(err.Error(), "DROVER_INSECURE_PLAINTEXT=1") {
		t.Errorf("plaintext on 0.0.0.0: %v", err)
	}
	if err := tlsconf.CheckListen(":7420", true, false); err != nil {
		t.Errorf("TLS on every interface: %v", err)
	}
	if err := tlsconf.CheckListen(":7420", false, true); err != nil {
		t.Errorf("plaintext allowed by --insecure-plaintext: %v", err)
	}
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
	if got != want {
		t.Errorf("FromEnv = %+v, want %+v", got, want)
	}
	if o := tlsconf.FromEnv(func(string) string { return "" }); o != (tlsconf.Options{}) {
		t.Errorf("empty environment gave %+v", o)
	}
	if o := tlsconf.FromEnv(func(k string) string { return map[string]string{"DROVER_INSECURE_PLAINTEXT": "0"}[k] }); o.InsecurePlaintext {
		t.Error("DROVER_INSECURE_PLAINTEXT=0 read as true")
	}
}

func TestServerAndClientConfigs(t *testing.T) {
	pki := tlstest.New(t, "unit")
	// Nothing given: plaintext (nil), not an error.
	if c, err := (tlsconf.Options{}).Server(); c != nil || err != nil {
		t.Errorf("empty Server() = %v, %v", c, err)
	}
	if c, err := (tlsconf.Options{}).Client(); c != nil || err != nil {
		t.Errorf("empty Client() = %v, %v", c, err)
	}
	s, err := tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}.Server()
	if err != nil || s == nil || len(s.Certificates) != 1 || s.ClientAuth != tls.RequireAndVerifyClientCert || s.ClientCAs == nil {
		t.Errorf("mTLS Server() = %+v, %v", s, err)
	}
	s, err = tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey}.Server()
	if err != nil || s.ClientAuth != tls.NoClientCert {
		t.Errorf("TLS Server() without client CA: client auth %v, %v", s.ClientAuth, err)
	}
	c, err := tlsconf.Options{CA: pki.CA, ServerName: "sched"}.Client()
	if err != nil || c == nil || c.RootCAs == nil || c.ServerName != "sched" || len(c.Certificates) != 0 {
		t.Errorf("Client() = %+v, %v", c, err)
	}
	c, err = tlsconf.Options{TLS: true}.Client()
	if err != nil || c == nil || c.RootCAs != nil {
		t.Errorf("Client() with system roots = %+v, %v", c, err)
	}

	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
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
			t.Errorf("%s: err = %v, want one line naming %q", name, err, tc.want)
		}
	}
	if c, err := (tlsconf.Options{CA: pki.CA}).AMQPTLS("amqp://guest:guest@127.0.0.1:5672/"); c != nil || err != nil {
		t.Errorf("AMQPTLS(amqp://) = %v, %v; want nil", c, err)
	}
	if c, err := (tlsconf.Options{CA: pki.CA}).AMQPTLS("amqps://u@rabbit:5671/"); c == nil || c.RootCAs == nil || err != nil {
		t.Errorf("AMQPTLS(amqps://) = %v, %v; want the CA", c, err)
	}
}

func TestTemporalApply(t *testing.T) {
	pki := tlstest.New(t, "temporal")
	var o client.Options
	if err := (tlsconf.Temporal{}).Apply(&o); err != nil || o.ConnectionOptions.TLS != nil || o.Credentials != nil {
		t.Errorf("no settings changed the options: %+v, %v", o.ConnectionOptions, err)
	}
	env := map[string]string{"TEMPORAL_TLS_CA": pki.CA, "TEMPORAL_TLS_CERT": pki.ClientCert, "TEMPORAL_TLS_KEY": pki.ClientKey,
		"TEMPORAL_TLS_SERVER_NAME": "temporal.example", "TEMPORAL_API_KEY": "k"}
	tt := tlsconf.TemporalFromEnv(func(k string) string { return env[k] })
	if err := tt.Apply(&o); err != nil {
		t.Fatal(err)
	}
	c := o.ConnectionOptions.TLS
	if c == nil || c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "temporal.example" || o.Credentials == nil {
		t.Errorf("Apply: TLS %+v, credentials %v", c, o.Credentials)
	}
	// An API key alone turns TLS on (system CAs).
	o = client.Options{}
	if err := (tlsconf.Temporal{APIKey: "k"}).Apply(&o); err != nil || o.ConnectionOptions.TLS == nil || o.Credentials == nil {
		t.Errorf("API key alone: %+v, %v", o.ConnectionOptions, err)
	}
	if err := (tlsconf.Temporal{Cert: pki.ClientCert}).Apply(&client.Options{}); err == nil || !strings.Contains(err.Error(), "TEMPORAL_TLS_KEY") {
		t.Errorf("cert without key: %v", err)
	}
}
