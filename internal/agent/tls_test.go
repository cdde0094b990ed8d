package agent

import (
	"context"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths; the certificate is its own CA.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "meshroll test host"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "host.crt"), filepath.Join(dir, "host.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

// The agent serves TLS with a token read from a file; a client trusting the
// agent's CA reads the report, one that does not trust it is refused by
// TLS, and a plain-HTTP client gets nothing.
func TestHostBinaryServesTLSWithTokenFile(t *testing.T) {
	bin := buildHost(t)
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("file-t0ken\n"), 0o600))

	p := startHost(t, bin, cleanEnv(), "--machine", "edge-1", "--listen", "127.0.0.1:0",
		"--state", filepath.Join(dir, "state"), "--log-format", "json",
		"--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokenFile)
	ctx := context.Background()

	hc, err := host.HTTPClientWithCA(certFile)
	require.NoError(t, err)
	c, err := host.NewHTTPClient("https://"+p.addr, "file-t0ken", hc)
	require.NoError(t, err)
	rep, err := c.Report(ctx)
	require.NoError(t, err)
	assert.Equal(t, "edge-1", rep.Machine)

	untrusting, err := host.NewHTTPClient("https://"+p.addr, "file-t0ken", nil)
	require.NoError(t, err)
	_, err = untrusting.Report(ctx)
	require.Error(t, err, "a certificate from an unknown CA is refused")

	wrong, err := host.NewHTTPClient("https://"+p.addr, "other", hc)
	require.NoError(t, err)
	_, err = wrong.Report(ctx)
	requireRefused(t, err, host.CodeUnauthorized)

	assert.Equal(t, 0, p.stop(t), p.log())
	assert.NotContains(t, p.log(), "file-t0ken")
	assert.Contains(t, p.log(), `"tls":true`)
}
