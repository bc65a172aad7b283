package temporalnode

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/tlsconf/tlstest"
)

func TestSecure(t *testing.T) {
	pki := tlstest.New(t, "temporal")
	var o client.Options
	if err := Secure(&o, tlsconf.Temporal{}); err != nil || o.ConnectionOptions.TLS != nil || o.Credentials != nil {
		assert.Fail(t, fmt.Sprintf("no settings changed the options: %+v, %v", o.ConnectionOptions, err))
	}
	env := map[string]string{"TEMPORAL_TLS_CA": pki.CA, "TEMPORAL_TLS_CERT": pki.ClientCert, "TEMPORAL_TLS_KEY": pki.ClientKey,
		"TEMPORAL_TLS_SERVER_NAME": "temporal.example", "TEMPORAL_API_KEY": "k"}
	tt := tlsconf.TemporalFromEnv(func(k string) string { return env[k] })
	require.NoError(t, Secure(&o, tt))
	c := o.ConnectionOptions.TLS
	if c == nil || c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "temporal.example" || o.Credentials == nil {
		assert.Fail(t, fmt.Sprintf("Secure: TLS %+v, credentials %v", c, o.Credentials))
	}
	// An API key alone turns TLS on (system CAs).
	o = client.Options{}
	if err := Secure(&o, tlsconf.Temporal{APIKey: "k"}); err != nil || o.ConnectionOptions.TLS == nil || o.Credentials == nil {
		assert.Fail(t, fmt.Sprintf("API key alone: %+v, %v", o.ConnectionOptions, err))
	}
	assert.ErrorContains(t, Secure(&client.Options{}, tlsconf.Temporal{Cert: pki.ClientCert}), "TEMPORAL_TLS_KEY", "cert without key")
}
