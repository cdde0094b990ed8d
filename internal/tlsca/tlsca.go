// Package tlsca reads the PEM CA file an operator names for a private CA
// (hosts, the registry, Temporal, Prometheus) into a certificate pool, so
// that every client reads it one way and says the same thing when the file
// is missing or holds no certificate.
package tlsca

import (
	"crypto/x509"
	"fmt"
	"os"
)

// Pool is the certificates in the PEM file at path, added to the system's
// roots when withSystemRoots is set (for a client that also reaches public
// endpoints) or alone (for one that must trust the private CA only).
// Errors name the file; callers add which setting named it.
func Pool(path string, withSystemRoots bool) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pool *x509.CertPool
	if withSystemRoots {
		pool, _ = x509.SystemCertPool()
	}
	if pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
