// Package tlstest makes a throwaway PKI for tests: a CA, a server
// certificate for loopback (127.0.0.1, ::1, localhost) and a client
// certificate, as PEM files in a directory.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and the certificates it signed, as PEM file paths.
type PKI struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string // for 127.0.0.1, ::1 and localhost
	ClientCert, ClientKey string // a client certificate (mTLS)
}

// New writes a fresh PKI into a temporary directory of t. name tells
// several PKIs apart in their subjects.
func New(t testing.TB, name string) *PKI {
	t.Helper()
	dir := t.TempDir()
	caKey := key(t)
	caTmpl := template(1, name+" test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage |= x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	noErr(t, err)
	ca, err := x509.ParseCertificate(caDER)
	noErr(t, err)
	p := &PKI{CA: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.CA, "CERTIFICATE", caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, server bool) (string, string) {
		k := key(t)
		tmpl := template(serial, cn)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		if server {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		noErr(t, err)
		kder, err := x509.MarshalECPrivateKey(k)
		noErr(t, err)
		cert, keyPath := filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, keyPath, "EC PRIVATE KEY", kder)
		return cert, keyPath
	}
	p.ServerCert, p.ServerKey = leaf(2, "server", x509.ExtKeyUsageServerAuth, true)
	p.ClientCert, p.ClientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth, false)
	return p
}

// template is a certificate for signatures, serial and cn, valid from an
// hour ago for a day.
func template(serial int64, cn string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// noErr ends the test on err.
func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func key(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	noErr(t, err)
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	noErr(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}
