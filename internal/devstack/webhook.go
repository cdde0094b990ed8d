package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/webhook"
	"github.com/meshroll/meshroll/internal/workerapp"
)

const (
	// DefaultWebhookListen is where the stack serves the merge receiver
	// unless worker.webhook_listen says otherwise: on loopback, the port
	// beside the fleet page's.
	DefaultWebhookListen = "127.0.0.1:8235"
	// WebhookSecretName is the file in the state directory holding the
	// receiver's secret the stack makes when the config gives none.
	WebhookSecretName = "webhook-secret"
)

// webhookDefaults turns the merge receiver on, on loopback, with a secret
// kept in the state directory (made at start) unless the config gives
// one.
func webhookDefaults(cfg *config.Config) {
	if cfg.Worker.WebhookListen == "" {
		cfg.Worker.WebhookListen = DefaultWebhookListen
	}
	if cfg.Worker.WebhookSecret == "" && cfg.Worker.WebhookSecretFile == "" {
		cfg.Worker.WebhookSecretFile = filepath.Join(cfg.StateDir, WebhookSecretName)
	}
}

// ensureSecret writes a random secret to path unless a file is there
// already, so that a restarted stack keeps the secret the git host (or
// the README's curl line) signs with, and the token its agents enroll
// with.
func ensureSecret(path string) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("secret %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		return fmt.Errorf("secret %s: %w", path, err)
	}
	return nil
}

// serveWebhooks serves the merge receiver as the worker does, and says
// where and how to read its secret.
func (s *stack) serveWebhooks(ctx context.Context, c client.Client) error {
	secret := "worker.webhook_secret"
	if f := s.cfg.Worker.WebhookSecretFile; f != "" {
		if f == filepath.Join(s.state, WebhookSecretName) {
			if err := ensureSecret(f); err != nil {
				return err
			}
		}
		secret = "cat " + s.display(f)
	}
	addr, stop, err := workerapp.ServeWebhooks(ctx, c, s.cfg, s.configDir, s.o.Log)
	if err != nil {
		return err
	}
	s.onStop("merge receiver", stopServer(stop))
	s.say("webhooks", "http://%s%s%s  (the merge receiver; also /%s and /%s; its secret: %s)",
		dialable(addr.String()), webhook.PathPrefix, webhook.GitHub, webhook.GitLab, webhook.Gitea, secret)
	return nil
}

// stopServer is a step of the stack's stop that shuts a server down,
// giving requests in flight ten seconds.
func stopServer(stop func(context.Context) error) func() error {
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return stop(sctx)
	}
}
