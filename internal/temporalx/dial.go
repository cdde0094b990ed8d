// Package temporalx dials the Temporal service the way every meshroll
// process does, so that the worker and the CLI agree on namespace, TLS, API
// keys and logging, and an unreachable server is one clear error naming the
// address tried.
package temporalx

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/payloads"
	"github.com/meshroll/meshroll/internal/tlsca"
)

// Options are the SDK client options for the configured Temporal: a dev
// server on loopback (plain), a self-hosted cluster over TLS or mTLS, or
// Temporal Cloud with mTLS or an API key.
func Options(t config.Temporal, log zerolog.Logger) (client.Options, error) {
	o := client.Options{
		HostPort:  t.Address,
		Namespace: t.Namespace,
		Logger:    logging.Temporal(log),
		// Every meshroll process reads and writes payloads alike.
		DataConverter: payloads.Converter,
	}
	if t.Compression() == config.CompressionNone {
		o.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if t.TLS.On() || t.APIKey != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.TLS.ServerName}
		if t.TLS.CAFile != "" {
			pool, err := tlsca.Pool(t.TLS.CAFile, false)
			if err != nil {
				return client.Options{}, fmt.Errorf("temporal.tls.ca_file: %w", err)
			}
			tc.RootCAs = pool
		}
		if t.TLS.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(t.TLS.CertFile, t.TLS.KeyFile)
			if err != nil {
				return client.Options{}, fmt.Errorf("temporal.tls client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		o.ConnectionOptions.TLS = tc
	}
	if t.APIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(t.APIKey.Reveal())
	}
	return o, nil
}

// Dial connects to the configured Temporal and checks it answers, within
// timeout.
func Dial(ctx context.Context, t config.Temporal, log zerolog.Logger, timeout time.Duration) (client.Client, error) {
	return DialWith(ctx, t, log, timeout, nil)
}

// DialWith is Dial with the SDK options passed through with before dialling
// (the worker adds its metrics handler and tracing interceptor there); nil
// leaves them as Options made them.
func DialWith(ctx context.Context, t config.Temporal, log zerolog.Logger, timeout time.Duration, with func(client.Options) client.Options) (client.Client, error) {
	o, err := Options(t, log)
	if err != nil {
		return nil, err
	}
	if with != nil {
		o = with(o)
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.DialContext(dctx, o)
	if err != nil {
		return nil, fmt.Errorf("temporal unreachable at %s (namespace %s): %w; %s", t.Address, t.Namespace, err, unreachableHint(t))
	}
	return c, nil
}

// unreachableHint is what to do about an unreachable Temporal: on this
// machine it is the dev stack's server, which the dev stack starts; anywhere
// else someone runs it, and the address may be the thing that is wrong.
func unreachableHint(t config.Temporal) string {
	if t.Local() {
		return "start the dev stack (go run ./worker --dev, which runs Temporal with everything else) or set temporal.address / MESHROLL_TEMPORAL_ADDRESS"
	}
	return "check that the Temporal frontend at " + t.Address + " is up and reachable from here, or set temporal.address / MESHROLL_TEMPORAL_ADDRESS"
}
