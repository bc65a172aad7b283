// Package tlsconf loads the TLS settings drover's processes share: the
// scheduler's server certificate (and the CA its clients' certificates must
// chain to, for mutual TLS), the CA that workers and the starter trust for
// the scheduler, RabbitMQ (amqps://) and Kafka, and the rule that a secret is
// never sent in plaintext beyond loopback.
//
// Every setting comes from a flag or, when the flag is not given, from the
// environment; FromEnv is the one place that reads the environment.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Options are one process's TLS settings. Cert and Key are the process's
// own certificate: the scheduler's server certificate, or a worker's or
// the starter's client certificate for mutual TLS.
type Options struct {
	// CA is a PEM file of the CAs a client trusts (DROVER_TLS_CA); set, the
	// client speaks TLS. Without it, TLS (DROVER_TLS=1) trusts the system's.
	CA string
	// TLS turns TLS on for a client without a CA file of its own.
	TLS bool
	// Cert and Key are PEM files of this process's certificate and key
	// (DROVER_TLS_CERT, DROVER_TLS_KEY).
	Cert, Key string
	// ClientCA, on a scheduler, is a PEM file of the CAs client
	// certificates must chain to; set, every session needs one (mTLS)
	// (DROVER_TLS_CLIENT_CA).
	ClientCA string
	// ServerName overrides the name a client checks the server's
	// certificate against (DROVER_TLS_SERVER_NAME); default: the host it
	// dials.
	ServerName string
	// InsecurePlaintext allows a plaintext session on a non-loopback
	// address (DROVER_INSECURE_PLAINTEXT=1): the token then travels in the
	// clear.
	InsecurePlaintext bool
	// KafkaSASLUsername and KafkaSASLPassword are the Kafka sinks' SASL
	// credentials (KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD): not TLS, but
	// a secret read from the environment like the rest.
	KafkaSASLUsername, KafkaSASLPassword string
}

// Env names, documented in docs/operating.md ("Security").
const (
	EnvCA                = "DROVER_TLS_CA"
	EnvTLS               = "DROVER_TLS"
	EnvCert              = "DROVER_TLS_CERT"
	EnvKey               = "DROVER_TLS_KEY"
	EnvClientCA          = "DROVER_TLS_CLIENT_CA"
	EnvServerName        = "DROVER_TLS_SERVER_NAME"
	EnvInsecurePlaintext = "DROVER_INSECURE_PLAINTEXT"
	EnvKafkaSASLUsername = "KAFKA_SASL_USERNAME"
	EnvKafkaSASLPassword = "KAFKA_SASL_PASSWORD"
)

// FromEnv reads the options from the environment (getenv is os.Getenv
// when nil). A boolean is true for 1, true, yes or on.
func FromEnv(getenv func(string) string) Options {
	if getenv == nil {
		getenv = os.Getenv
	}
	return Options{
		CA:                getenv(EnvCA),
		TLS:               truthy(getenv(EnvTLS)),
		Cert:              getenv(EnvCert),
		Key:               getenv(EnvKey),
		ClientCA:          getenv(EnvClientCA),
		ServerName:        getenv(EnvServerName),
		InsecurePlaintext: truthy(getenv(EnvInsecurePlaintext)),
		KafkaSASLUsername: getenv(EnvKafkaSASLUsername),
		KafkaSASLPassword: getenv(EnvKafkaSASLPassword),
	}
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true
	}
	b, _ := strconv.ParseBool(s)
	return b
}

// Flags registers the options on fs with o's values (say, FromEnv's) as
// defaults. server adds the scheduler's --tls-client-ca; a client gets
// --tls-ca, --tls and --tls-server-name.
func (o *Options) Flags(fs *flag.FlagSet, server bool) {
	fs.StringVar(&o.Cert, "tls-cert", o.Cert, "PEM certificate of this process (the scheduler's server certificate, a client's certificate for mTLS) ($"+EnvCert+")")
	fs.StringVar(&o.Key, "tls-key", o.Key, "PEM private key of --tls-cert ($"+EnvKey+")")
	if server {
		fs.StringVar(&o.ClientCA, "tls-client-ca", o.ClientCA, "PEM CAs that sessions' client certificates must chain to; set, a client certificate is required (mTLS) ($"+EnvClientCA+")")
	}
	fs.StringVar(&o.CA, "tls-ca", o.CA, "PEM CAs trusted for the scheduler's sessions, amqps:// and Kafka TLS; set, sessions use TLS ($"+EnvCA+")")
	fs.BoolVar(&o.TLS, "tls", o.TLS, "use TLS for scheduler sessions with the system's CAs ($"+EnvTLS+")")
	fs.StringVar(&o.ServerName, "tls-server-name", o.ServerName, "name to check the scheduler's certificate against (default: the host dialled) ($"+EnvServerName+")")
	fs.BoolVar(&o.InsecurePlaintext, "insecure-plaintext", o.InsecurePlaintext, "allow plaintext sessions on a non-loopback address: the token travels in the clear ($"+EnvInsecurePlaintext+")")
}

// Server is the scheduler's TLS config: nil (plaintext) when no
// certificate is given.
func (o Options) Server() (*tls.Config, error) {
	if o.Cert == "" && o.Key == "" {
		if o.ClientCA != "" {
			return nil, fmt.Errorf("--tls-client-ca (%s) needs --tls-cert and --tls-key (%s, %s)", EnvClientCA, EnvCert, EnvKey)
		}
		return nil, nil
	}
	cert, err := o.keyPair()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if o.ClientCA != "" {
		pool, err := LoadPool(o.ClientCA, "--tls-client-ca")
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client is a client's TLS config: nil (plaintext) when neither a CA, a
// client certificate nor TLS is asked for.
func (o Options) Client() (*tls.Config, error) {
	if o.CA == "" && o.Cert == "" && o.Key == "" && !o.TLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CA != "" {
		pool, err := LoadPool(o.CA, "--tls-ca")
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if o.Cert != "" || o.Key != "" {
		cert, err := o.keyPair()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ServiceTLS is the TLS config of the process's other clients, RabbitMQ
// (amqps://) and Kafka (?tls=true): it trusts the CAs of --tls-ca, the
// system's when CA is not set. It carries no client certificate.
func (o Options) ServiceTLS() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CA != "" {
		pool, err := LoadPool(o.CA, "--tls-ca")
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// AMQPTLS is ServiceTLS for an amqps:// AMQP_URL, and nil for amqp://.
func (o Options) AMQPTLS(amqpURL string) (*tls.Config, error) {
	if !strings.HasPrefix(strings.ToLower(amqpURL), "amqps://") {
		return nil, nil
	}
	return o.ServiceTLS()
}

func (o Options) keyPair() (tls.Certificate, error) {
	if o.Cert == "" || o.Key == "" {
		return tls.Certificate{}, fmt.Errorf("--tls-cert and --tls-key (%s, %s) go together: give both", EnvCert, EnvKey)
	}
	cert, err := tls.LoadX509KeyPair(o.Cert, o.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS certificate %s / key %s: %v", o.Cert, o.Key, err)
	}
	return cert, nil
}

// LoadPool reads a PEM file of CA certificates; what names the setting in
// the error.
func LoadPool(path, what string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", what, path)
	}
	return pool, nil
}

// ErrPlaintext is why a secret was not sent, or a listener not opened, in
// plaintext beyond loopback.
var ErrPlaintext = errors.New("plaintext beyond loopback")

// IsLoopbackAddr says whether a host:port (or bare host) names only
// loopback: "localhost" or an IP in 127.0.0.0/8 or ::1. An empty host (all
// interfaces) or any other name is not loopback.
func IsLoopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackNetAddr says whether a connection's address is a loopback IP.
func IsLoopbackNetAddr(a net.Addr) bool {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.IsLoopback()
	}
	if a == nil {
		return false
	}
	return IsLoopbackAddr(a.String())
}

// CheckListen refuses a plaintext listener on a non-loopback address
// unless insecure allows it.
func CheckListen(addr string, tlsOn, insecure bool) error {
	if tlsOn || insecure || IsLoopbackAddr(addr) {
		return nil
	}
	return fmt.Errorf("%w: refusing to listen on %s without TLS (the session token would travel in the clear); give --tls-cert and --tls-key (%s, %s), or --insecure-plaintext (%s=1)",
		ErrPlaintext, addr, EnvCert, EnvKey, EnvInsecurePlaintext)
}
