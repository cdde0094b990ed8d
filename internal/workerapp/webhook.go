package workerapp

import (
	"context"
	"net"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/webhook"
)

// ServeWebhooks serves the merge receiver (package webhook) on
// cfg.Worker.WebhookListen: push events matched to the config's modules
// (their clones' origins read now, from configDir) start Receive
// workflows through the worker's own client on its task queue. It
// returns the address it listens on and what stops it; the worker's
// command and the dev stack both serve it through here.
func ServeWebhooks(ctx context.Context, c client.Client, cfg *config.Config, configDir string, log zerolog.Logger) (net.Addr, func(context.Context) error, error) {
	key, err := cfg.Worker.WebhookKey()
	if err != nil {
		return nil, nil, err
	}
	log = log.With().Str("component", "merge-receiver").Logger()
	h, err := webhook.New(webhook.Options{
		Secret:  key,
		MaxBody: cfg.Worker.WebhookBodyLimit(),
		Routes:  webhook.Routes(ctx, cfg, configDir),
		Starter: webhook.Temporal{Client: c, TaskQueue: cfg.Temporal.TaskQueue},
		Log:     log,
	})
	if err != nil {
		return nil, nil, err
	}
	return serve(cfg.Worker.WebhookListen, "worker.webhook_listen", h, 30*time.Second, log)
}
