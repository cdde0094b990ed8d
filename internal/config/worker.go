package config

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/meshroll/meshroll/internal/secret"
)

// Worker holds the worker process's own settings: its metrics and health
// endpoints, tracing and Worker Versioning. Each is off until set, so a dev
// mesh runs without a collector or a deployment.
type Worker struct {
	// MetricsListen is the host:port serving /metrics (Prometheus: the
	// Temporal SDK's metrics and meshroll's), /livez and /readyz. Empty:
	// not served.
	MetricsListen string `mapstructure:"metrics_listen"`
	// UIListen is the host:port serving the fleet page (package fleetui):
	// what every machine runs and what is moving, read-only. Empty: not
	// served. Beyond loopback it needs UIToken or UITokenFile, because the
	// page shows the whole fleet to whoever reaches it.
	UIListen string `mapstructure:"ui_listen"`
	// UIToken is the token the fleet page asks for (a bearer token, or
	// once as ?token= in a browser, which then keeps it in a cookie). Put
	// it in MESHROLL_WORKER_UI_TOKEN, not the file; it is never logged.
	UIToken secret.String `mapstructure:"ui_token"`
	// UITokenFile is a file holding UIToken instead (surrounding white
	// space ignored), as the host agent's --token-file: what a secret
	// mounted by an orchestrator looks like.
	UITokenFile string `mapstructure:"ui_token_file"`
	// WebhookListen is the host:port serving the merge receiver (package
	// webhook): push events from GitHub, GitLab and Gitea/Forgejo at
	// /v1/webhooks/<provider>, each of which starts the plans of the
	// modules its commits touch. Empty: not served. It needs WebhookSecret
	// or WebhookSecretFile, because whoever can post to it starts plans.
	WebhookListen string `mapstructure:"webhook_listen"`
	// WebhookSecret is the secret shared with the git host: the HMAC key of
	// GitHub's and Gitea's signatures, GitLab's token. Put it in
	// MESHROLL_WORKER_WEBHOOK_SECRET, not the file; it is never logged.
	WebhookSecret secret.String `mapstructure:"webhook_secret"`
	// WebhookSecretFile is a file holding WebhookSecret instead
	// (surrounding white space ignored).
	WebhookSecretFile string `mapstructure:"webhook_secret_file"`
	// WebhookMaxBody caps a delivery's body, a size with a unit such as
	// 1MiB (default DefaultWebhookMaxBody): a larger one is refused with
	// 413 before it is read further, as Argo CD's maxPayloadSizeMB does.
	// Read it through WebhookBodyLimit.
	WebhookMaxBody string `mapstructure:"webhook_max_body"`
	// EnrollListen is the host:port serving the enrollment endpoint
	// (package enroll): agents started with --enroll ask there to join,
	// and wait as pending until an operator admits them. Empty: not
	// served. It needs EnrollToken or EnrollTokenFile.
	EnrollListen string `mapstructure:"enroll_listen"`
	// EnrollToken is the token agents present when they ask (their
	// --enroll-token-file). Put it in MESHROLL_WORKER_ENROLL_TOKEN, not
	// the file; it is never logged.
	EnrollToken secret.String `mapstructure:"enroll_token"`
	// EnrollTokenFile is a file holding EnrollToken instead.
	EnrollTokenFile string `mapstructure:"enroll_token_file"`
	// Tracing exports OpenTelemetry spans of workflows and activities.
	Tracing Tracing `mapstructure:"tracing"`
	// Versioning joins the worker to a Temporal Worker Deployment.
	Versioning Versioning `mapstructure:"versioning"`
}

// FleetToken is the token the fleet page asks for: UIToken, or the
// contents of UITokenFile read now (so that a rotated file is read at the
// next start); "" when neither is set.
func (w Worker) FleetToken() (secret.String, error) {
	return tokenOrFile(w.UIToken, w.UITokenFile, "worker.ui_token_file")
}

// WebhookKey is the merge receiver's shared secret: WebhookSecret, or the
// contents of WebhookSecretFile read now; "" when neither is set.
func (w Worker) WebhookKey() (secret.String, error) {
	return tokenOrFile(w.WebhookSecret, w.WebhookSecretFile, "worker.webhook_secret_file")
}

// EnrollKey is the enrollment token: EnrollToken, or the contents of
// EnrollTokenFile read now; "" when neither is set.
func (w Worker) EnrollKey() (secret.String, error) {
	return tokenOrFile(w.EnrollToken, w.EnrollTokenFile, "worker.enroll_token_file")
}

// WebhookBodyLimit is WebhookMaxBody in bytes, DefaultWebhookMaxBody's
// when unset or unreadable (Validate refuses the latter).
func (w Worker) WebhookBodyLimit() int64 {
	if n, err := ParseMemory(w.WebhookMaxBody); err == nil && n > 0 {
		return n
	}
	n, _ := ParseMemory(DefaultWebhookMaxBody)
	return n
}

// tokenOrFile is tok, or when file is set its contents read now without
// surrounding white space, as the host agent's --token-file reads one;
// key names file in errors.
func tokenOrFile(tok secret.String, file, key string) (secret.String, error) {
	if file == "" {
		return tok, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", key, file)
	}
	return secret.String(s), nil
}

// Tracing is where the worker sends its spans. Off unless OTLPEndpoint is
// set, because a span exporter without a collector only logs failures.
type Tracing struct {
	// OTLPEndpoint is the OTLP/HTTP collector's URL, such as
	// http://otel-collector:4318 (https for TLS). Empty: tracing off.
	OTLPEndpoint string `mapstructure:"otlp_endpoint"`
	// ServiceName is the spans' service.name (default meshroll-worker).
	ServiceName string `mapstructure:"service_name"`
}

// Service is ServiceName or, when empty, the default, so that a config
// built in code needs neither.
func (t Tracing) Service() string {
	return cmp.Or(t.ServiceName, DefaultTracingServiceName)
}

// Versioning is Temporal Worker Versioning: with it on, a plan stays on the
// build of the worker that started it (pinned) while machine workflows move
// to the deployment's current build (auto-upgrade), so a worker can be
// replaced under plans in flight.
type Versioning struct {
	// Enabled turns Worker Versioning on.
	Enabled bool `mapstructure:"enabled"`
	// DeploymentName is the Worker Deployment's name (default meshroll).
	DeploymentName string `mapstructure:"deployment_name"`
	// BuildID names this worker's build. Empty: the VCS revision the
	// binary was built from (or the worker's --build-id flag).
	BuildID string `mapstructure:"build_id"`
}

// Deployment is DeploymentName or, when empty, the default.
func (v Versioning) Deployment() string {
	return cmp.Or(v.DeploymentName, DefaultDeploymentName)
}

// webhookProblems checks the merge receiver's keys: an address to bind, one
// secret (a receiver without one would start plans for anyone who posts),
// and a body cap that reads as a size.
func (c *Config) webhookProblems(ps *problemList) {
	w := c.Worker
	ps.secretOnce("worker.webhook_secret", "worker.webhook_secret", "the merge receiver's secret", w.WebhookSecret, w.WebhookSecretFile)
	if w.WebhookListen != "" {
		if msg := checkListen(w.WebhookListen); msg != "" {
			ps.add("worker.webhook_listen", "%s", msg)
		} else if w.WebhookSecret == "" && w.WebhookSecretFile == "" {
			ps.add("worker.webhook_listen", "the merge receiver has no secret: anyone who can post to %s could start plans; "+
				"set %s (or worker.webhook_secret_file) to the secret the git host signs with", w.WebhookListen, envName("worker", "webhook_secret"))
		}
	}
	if s := w.WebhookMaxBody; s != "" {
		if n, err := ParseMemory(s); err != nil {
			ps.add("worker.webhook_max_body", "%v", err)
		} else if n < 1<<10 {
			ps.add("worker.webhook_max_body", "%q is under 1KiB, smaller than any push event; want a size such as %s", s, DefaultWebhookMaxBody)
		}
	}
}
