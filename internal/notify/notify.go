// Package notify renders a plan's events for the team's tools and posts
// them: a generic webhook gets a JSON body signed with HMAC-SHA256
// (X-Meshroll-Signature-256) and an idempotency key, a Slack-compatible
// incoming webhook gets {"text": ...}. The Notifier workflow delivers
// through it (an activity per attempt), so that a receiver that is down is
// tried again with backoff and never holds a plan back.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
	"github.com/meshroll/meshroll/internal/webhook"
)

// Headers of a webhook delivery.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the
	// body under the target's secret, when it has one.
	SignatureHeader = "X-Meshroll-Signature-256"
	// KeyHeader carries the event's idempotency key, as the body does: a
	// receiver drops a delivery whose key it has seen.
	KeyHeader = "Idempotency-Key"
	// EventHeader names the event, so that a receiver can route without
	// reading the body.
	EventHeader = "X-Meshroll-Event"
)

// Links are where a notification points a person: the plan's page in the
// Temporal Web UI and the fleet page, each "" when its URL is not set.
type Links struct {
	WebUI string `json:"web_ui,omitempty"`
	Fleet string `json:"fleet,omitempty"`
}

// Body is the generic webhook's JSON: the event with its key and links.
type Body struct {
	ID string `json:"id"`
	meshapi.NotifyEvent
	Links Links `json:"links"`
}

// Target is one receiver as a delivery sees it: its kind, URL and the
// secret that signs its body ("" for none).
type Target struct {
	Kind string
	URL  string
	Key  secret.String
}

// Sign is the X-Meshroll-Signature-256 value of body under key: the
// same HMAC-SHA256 as a git host's signature (webhook.Sign).
func Sign(key secret.String, body []byte) string {
	return "sha256=" + webhook.Sign([]byte(key.Reveal()), body)
}

// WebhookBody is the generic webhook's body of e.
func WebhookBody(e meshapi.NotifyEvent, l Links) ([]byte, error) {
	b, err := json.Marshal(Body{ID: e.Key(), NotifyEvent: e, Links: l})
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.Key(), err)
	}
	return b, nil
}

// SlackText is the Slack message of e: the module, commit and state, the
// plan's words, the command that moves it on, and its links.
func SlackText(e meshapi.NotifyEvent, l Links) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s* %s %s: %s", e.Module, mesh.ShortCommit(e.Commit), strings.ReplaceAll(e.Event, "_", " "), e.State)
	if e.Reason != "" {
		fmt.Fprintf(&b, "\n%s", e.Reason)
	}
	if e.Command != "" {
		fmt.Fprintf(&b, "\n`%s`", e.Command)
	}
	var links []string
	if l.WebUI != "" {
		links = append(links, "<"+l.WebUI+"|plan in the Web UI>")
	}
	if l.Fleet != "" {
		links = append(links, "<"+l.Fleet+"|fleet page>")
	}
	if len(links) > 0 {
		fmt.Fprintf(&b, "\n%s", strings.Join(links, " · "))
	}
	return b.String()
}

// Request is the HTTP request that delivers e to t.
func Request(ctx context.Context, t Target, e meshapi.NotifyEvent, l Links) (*http.Request, error) {
	var body []byte
	var err error
	if t.Kind == config.NotifySlack {
		body, err = json.Marshal(map[string]string{"text": SlackText(e, l)})
	} else {
		body, err = WebhookBody(e, l)
	}
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request for event %s: %w", e.Key(), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "meshroll-notify")
	if t.Kind != config.NotifySlack {
		req.Header.Set(KeyHeader, e.Key())
		req.Header.Set(EventHeader, e.Event)
		if t.Key != "" {
			req.Header.Set(SignatureHeader, Sign(t.Key, body))
		}
	}
	return req, nil
}

// Send delivers e to t once: nil when the receiver answered 2xx. The error
// names the status and the start of the answer, never the URL (a Slack
// webhook's URL is its secret).
func Send(ctx context.Context, c *http.Client, t Target, e meshapi.NotifyEvent, l Links) error {
	req, err := Request(ctx, t, e, l)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("post event %s: %w", e.Key(), redact(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post event %s: receiver answered %s: %s", e.Key(), resp.Status, strings.TrimSpace(string(answer)))
	}
	return nil
}

// redact drops the URL from a transport error, keeping what went wrong.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
