package testsuite

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// testCA issues certificates for a TLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "meshroll test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate and key signed by the CA and returns the
// paths and the pair.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) (string, string, tls.Certificate) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(cf, certPEM, 0o600))
	require.NoError(t, os.WriteFile(kf, keyPEM, 0o600))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return cf, kf, pair
}

// mtlsFront terminates mTLS in front of a plain Temporal frontend, as a
// cluster's load balancer or Temporal Cloud does, forwarding each
// connection's bytes (gRPC over HTTP/2) to target.
func mtlsFront(t *testing.T, target string, server tls.Certificate, clients *x509.CertPool) string {
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server}, ClientCAs: clients, ClientAuth: tls.RequireAndVerifyClientCert,
		NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in) }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return l.Addr().String()
}

// The worker and the starter reach a Temporal that demands mTLS with the
// config's CA, client certificate and server name; without the client
// certificate they are refused.
func TestTemporalClientMTLS(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t, devserver.Options{})
	dir := t.TempDir()
	ca := newTestCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.pem, 0o600))
	_, _, serverPair := ca.issue(t, dir, "temporal.test", x509.ExtKeyUsageServerAuth)
	certFile, keyFile, _ := ca.issue(t, dir, "worker.test", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	front := mtlsFront(t, srv.HostPort(), serverPair, pool)

	cfg := config.Temporal{
		Address: front, Namespace: "default",
		TLS: config.TemporalTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: "temporal.test"},
	}
	ctx := context.Background()
	c, err := temporalx.Dial(ctx, cfg, zerolog.Nop(), 20*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err, "a call over mTLS reaches the server")

	cfg.TLS.CertFile, cfg.TLS.KeyFile = "", ""
	_, err = temporalx.Dial(ctx, cfg, zerolog.Nop(), 5*time.Second)
	require.Error(t, err, "without the client certificate the front refuses")
	require.Contains(t, err.Error(), front, "the error names the address tried")
}

func TestTemporalClientOptions(t *testing.T) {
	t.Parallel()
	o, err := temporalx.Options(config.Temporal{Address: "127.0.0.1:7233", Namespace: "default"}, zerolog.Nop())
	require.NoError(t, err)
	require.Nil(t, o.ConnectionOptions.TLS, "a dev server on loopback is plain")
	require.Nil(t, o.Credentials)

	o, err = temporalx.Options(config.Temporal{Address: "ns.acct.tmprl.cloud:7233", Namespace: "ns.acct", APIKey: "k3y"}, zerolog.Nop())
	require.NoError(t, err)
	require.NotNil(t, o.ConnectionOptions.TLS, "an API key implies TLS")
	require.NotNil(t, o.Credentials)

	_, err = temporalx.Options(config.Temporal{Address: "x:1", TLS: config.TemporalTLS{CAFile: filepath.Join(t.TempDir(), "none.pem")}}, zerolog.Nop())
	require.ErrorContains(t, err, "temporal.tls.ca_file")
	require.NotContains(t, fmt.Sprint(config.Temporal{APIKey: "k3y"}), "k3y")
}
