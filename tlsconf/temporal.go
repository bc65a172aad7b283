package tlsconf

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
)

// Temporal are a Temporal client's security settings, read from the
// environment under the names the `temporal` CLI uses.
type Temporal struct {
	// TLS turns TLS on with the system's CAs (TEMPORAL_TLS=1); a CA, a
	// client certificate or an API key turn it on too.
	TLS bool
	// CA is a PEM file of the CAs that sign the server's certificate
	// (TEMPORAL_TLS_CA).
	CA string
	// Cert and Key are the client's certificate and key for mTLS
	// (TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY).
	Cert, Key string
	// ServerName is the name the server's certificate is checked against
	// (TEMPORAL_TLS_SERVER_NAME); default: the host of TEMPORAL_ADDRESS.
	ServerName string
	// APIKey is sent as a bearer token on every call (TEMPORAL_API_KEY);
	// the SDK then uses TLS.
	APIKey string
}

// TemporalFromEnv reads the Temporal client's security settings
// (getenv is os.Getenv when nil).
func TemporalFromEnv(getenv func(string) string) Temporal {
	if getenv == nil {
		getenv = os.Getenv
	}
	return Temporal{
		TLS:        truthy(getenv("TEMPORAL_TLS")),
		CA:         getenv("TEMPORAL_TLS_CA"),
		Cert:       getenv("TEMPORAL_TLS_CERT"),
		Key:        getenv("TEMPORAL_TLS_KEY"),
		ServerName: getenv("TEMPORAL_TLS_SERVER_NAME"),
		APIKey:     getenv("TEMPORAL_API_KEY"),
	}
}

// Enabled says whether the client speaks TLS.
func (t Temporal) Enabled() bool {
	return t.TLS || t.CA != "" || t.Cert != "" || t.Key != "" || t.ServerName != "" || t.APIKey != ""
}

// TLSConfig is the client's TLS configuration: nil when no setting is
// given (plaintext, as a dev server wants); the system's CAs unless CA
// names others. temporalnode.Secure puts it, and the API key, into a
// Temporal client's options (tlsconf links no Temporal code, for the
// scheduler's sake).
func (t Temporal) TLSConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pool, err := LoadPool(t.CA, "TEMPORAL_TLS_CA")
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if t.Cert != "" || t.Key != "" {
		if t.Cert == "" || t.Key == "" {
			return nil, fmt.Errorf("TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together: give both")
		}
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("Temporal client certificate %s / key %s: %v", t.Cert, t.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// TemporalHint names a TLS mismatch with the Temporal server, or is "".
// c is the client's TLS config (nil: plaintext). definite says that
// waiting cannot cure it: TLS spoken to a plaintext server or the other
// way round, a server certificate the client does not trust, a client
// certificate the server requires. A connection cut during the handshake
// of a client without a certificate is only likely to be the last
// (the server's alert can lose the race with the client's write).
func TemporalHint(err error, c *tls.Config) (hint string, definite bool) {
	const needCert = "the Temporal server requires a client certificate it trusts (set TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY)"
	msg := err.Error()
	switch {
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the Temporal server does not speak TLS (unset TEMPORAL_TLS, TEMPORAL_TLS_CA, TEMPORAL_TLS_CERT, TEMPORAL_API_KEY, or point TEMPORAL_ADDRESS at its TLS port)", true
	case strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate"):
		return needCert, true
	case strings.Contains(msg, "x509: "):
		return "the Temporal server's certificate is not trusted (set TEMPORAL_TLS_CA to its CA, TEMPORAL_TLS_SERVER_NAME to the name it holds)", true
	case c == nil && (strings.Contains(msg, "error reading server preface") || strings.Contains(msg, "http2: frame too large")):
		return "the Temporal server speaks TLS and this client does not (set TEMPORAL_TLS=1 or TEMPORAL_TLS_CA)", true
	case c != nil && len(c.Certificates) == 0 && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")):
		return "the connection was cut during TLS: " + needCert + "?", false
	}
	return "", false
}
