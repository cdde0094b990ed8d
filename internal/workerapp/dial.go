package workerapp

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/telemetry"
	"github.com/meshroll/meshroll/internal/temporalx"
	"github.com/meshroll/meshroll/workflows"
)

// NewTelemetry builds the worker's metrics (with the help text of
// meshroll's own) and tracing from the config's worker section.
func NewTelemetry(w config.Worker, log zerolog.Logger) (*telemetry.Telemetry, error) {
	return telemetry.New(telemetry.Options{Worker: w, Log: log, Help: workflows.MetricHelp})
}

// Dial connects the worker's client to the configured Temporal with tel's
// metrics handler and tracing interceptor, which the SDK hands on to every
// worker built on the client, and checks the frontend answers within
// timeout.
func Dial(ctx context.Context, cfg *config.Config, tel *telemetry.Telemetry, log zerolog.Logger, timeout time.Duration) (client.Client, error) {
	return temporalx.DialWith(ctx, cfg.Temporal, log, timeout, tel.ClientOptions)
}
