// Package temporalx dials the Temporal service the way every meshroll
// process does, so that the worker and the CLI agree on namespace and
// logging, and an unreachable server is one clear error naming the address
// tried.
package temporalx

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/logging"
)

// Dial connects to the configured Temporal and checks it answers, within
// timeout.
func Dial(ctx context.Context, t config.Temporal, log zerolog.Logger, timeout time.Duration) (client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{
		HostPort:  t.Address,
		Namespace: t.Namespace,
		Logger:    logging.Temporal(log),
	})
	if err != nil {
		return nil, fmt.Errorf("temporal unreachable at %s (namespace %s): %w; start it (temporal server start-dev) or set temporal.address / MESHROLL_TEMPORAL_ADDRESS",
			t.Address, t.Namespace, err)
	}
	return c, nil
}
