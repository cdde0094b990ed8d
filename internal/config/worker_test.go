package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkerDefaults(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(valid))
	require.NoError(t, err)
	assert.Equal(t, Worker{
		Tracing:    Tracing{ServiceName: DefaultTracingServiceName},
		Versioning: Versioning{DeploymentName: DefaultDeploymentName},
	}, c.Worker, "metrics, tracing and versioning are all off by default")
}

func TestWorkerKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		env  map[string]string
		want Worker
	}{
		{
			name: "every key in the file",
			src: `worker:
  metrics_listen: 127.0.0.1:9090
  ui_listen: 127.0.0.1:8234
  webhook_listen: 127.0.0.1:8235
  webhook_secret_file: /run/secrets/hook
  webhook_max_body: 512KiB
  tracing: {otlp_endpoint: "http://otel:4318", service_name: mesh-w}
  versioning: {enabled: true, deployment_name: mesh-prod, build_id: 8dadda9}
`,
			want: Worker{
				MetricsListen: "127.0.0.1:9090",
				UIListen:      "127.0.0.1:8234",
				WebhookListen: "127.0.0.1:8235", WebhookSecretFile: "/run/secrets/hook", WebhookMaxBody: "512KiB",
				Tracing:    Tracing{OTLPEndpoint: "http://otel:4318", ServiceName: "mesh-w"},
				Versioning: Versioning{Enabled: true, DeploymentName: "mesh-prod", BuildID: "8dadda9"},
			},
		},
		{
			name: "every key from the environment",
			env: map[string]string{
				"MESHROLL_WORKER_METRICS_LISTEN":             ":9464",
				"MESHROLL_WORKER_UI_LISTEN":                  ":8234",
				"MESHROLL_WORKER_UI_TOKEN":                   "s3cret",
				"MESHROLL_WORKER_WEBHOOK_LISTEN":             ":8235",
				"MESHROLL_WORKER_WEBHOOK_SECRET":             "hook-s3cret",
				"MESHROLL_WORKER_WEBHOOK_MAX_BODY":           "2MiB",
				"MESHROLL_WORKER_TRACING_OTLP_ENDPOINT":      "https://otel.internal:4318",
				"MESHROLL_WORKER_VERSIONING_ENABLED":         "true",
				"MESHROLL_WORKER_VERSIONING_DEPLOYMENT_NAME": "mesh-env",
				"MESHROLL_WORKER_VERSIONING_BUILD_ID":        "build-7",
			},
			want: Worker{
				MetricsListen: ":9464",
				UIListen:      ":8234",
				UIToken:       "s3cret",
				WebhookListen: ":8235", WebhookSecret: "hook-s3cret", WebhookMaxBody: "2MiB",
				Tracing:    Tracing{OTLPEndpoint: "https://otel.internal:4318", ServiceName: DefaultTracingServiceName},
				Versioning: Versioning{Enabled: true, DeploymentName: "mesh-env", BuildID: "build-7"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Parse("mesh.yaml", []byte(valid+tc.src))
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Worker)
		})
	}
}

func TestWorkerEmptyNamesTakeDefaults(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(valid+"worker:\n  tracing: {service_name: ''}\n  versioning: {deployment_name: ''}\n"))
	require.NoError(t, err)
	assert.Equal(t, DefaultTracingServiceName, c.Worker.Tracing.Service())
	assert.Equal(t, DefaultDeploymentName, c.Worker.Versioning.Deployment())
	assert.Equal(t, "mine", Tracing{ServiceName: "mine"}.Service())
	assert.Equal(t, "mine", Versioning{DeploymentName: "mine"}.Deployment())
}

func TestWorkerProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		env  map[string]string
		want []Problem
	}{
		{
			name: "metrics address without a port",
			src:  "worker:\n  metrics_listen: 127.0.0.1\n",
			want: []Problem{{"worker.metrics_listen", `"127.0.0.1" is not host:port; want an address to listen on, such as 127.0.0.1:9090 or :9090 (line 8)`}},
		},
		{
			name: "metrics port not a number",
			src:  "worker:\n  metrics_listen: 'localhost:http'\n",
			want: []Problem{{"worker.metrics_listen", `"localhost:http" has no port number; want an address to listen on, such as localhost:9090 (line 8)`}},
		},
		{
			name: "metrics address from the environment",
			env:  map[string]string{"MESHROLL_WORKER_METRICS_LISTEN": "nine"},
			want: []Problem{{"worker.metrics_listen", `"nine" is not host:port; want an address to listen on, such as 127.0.0.1:9090 or :9090 (from MESHROLL_WORKER_METRICS_LISTEN)`}},
		},
		{
			name: "metrics_listen is a mapping",
			src:  "worker:\n  metrics_listen: {port: 9090}\n",
			want: []Problem{{"worker.metrics_listen", "must be a string, got a mapping (line 8)"}},
		},
		{
			name: "fleet page address without a port",
			src:  "worker:\n  ui_listen: localhost\n",
			want: []Problem{{"worker.ui_listen", `"localhost" is not host:port; want an address to listen on, such as 127.0.0.1:9090 or :9090 (line 8)`}},
		},
		{
			name: "fleet page on every interface without a token",
			src:  "worker:\n  ui_listen: ':8234'\n",
			want: []Problem{{"worker.ui_listen", `":8234" is not a loopback address and the fleet page has no token: it would show the whole fleet to anyone who reaches it; set MESHROLL_WORKER_UI_TOKEN (or worker.ui_token_file), or listen on 127.0.0.1 and put your proxy in front (line 8)`}},
		},
		{
			name: "fleet page on a network address from the environment, without a token",
			env:  map[string]string{"MESHROLL_WORKER_UI_LISTEN": "10.0.0.5:8234"},
			want: []Problem{{"worker.ui_listen", `"10.0.0.5:8234" is not a loopback address and the fleet page has no token: it would show the whole fleet to anyone who reaches it; set MESHROLL_WORKER_UI_TOKEN (or worker.ui_token_file), or listen on 127.0.0.1 and put your proxy in front (from MESHROLL_WORKER_UI_LISTEN)`}},
		},
		{
			name: "fleet page token given twice",
			src:  "worker:\n  ui_listen: 127.0.0.1:8234\n  ui_token_file: /run/secrets/ui\n",
			env:  map[string]string{"MESHROLL_WORKER_UI_TOKEN": "s3cret"},
			want: []Problem{{"worker.ui_token_file", "give the fleet page's token either as worker.ui_token or as a file, not both (line 9)"}},
		},
		{
			name: "merge receiver without a secret",
			src:  "worker:\n  webhook_listen: 127.0.0.1:8235\n",
			want: []Problem{{"worker.webhook_listen", "the merge receiver has no secret: anyone who can post to 127.0.0.1:8235 could start plans; set MESHROLL_WORKER_WEBHOOK_SECRET (or worker.webhook_secret_file) to the secret the git host signs with (line 8)"}},
		},
		{
			name: "merge receiver address without a port",
			src:  "worker:\n  webhook_listen: localhost\n  webhook_secret_file: /run/hook\n",
			want: []Problem{{"worker.webhook_listen", `"localhost" is not host:port; want an address to listen on, such as 127.0.0.1:9090 or :9090 (line 8)`}},
		},
		{
			name: "merge receiver secret given twice",
			src:  "worker:\n  webhook_listen: 127.0.0.1:8235\n  webhook_secret_file: /run/hook\n",
			env:  map[string]string{"MESHROLL_WORKER_WEBHOOK_SECRET": "s3cret"},
			want: []Problem{{"worker.webhook_secret_file", "give the merge receiver's secret either as worker.webhook_secret or as a file, not both (line 9)"}},
		},
		{
			name: "merge receiver body cap without a unit",
			src:  "worker:\n  webhook_max_body: 1048576\n",
			want: []Problem{{"worker.webhook_max_body", `"1048576" is not a size with a unit, such as 256MiB or 1GiB (line 8)`}},
		},
		{
			name: "merge receiver body cap too small",
			env:  map[string]string{"MESHROLL_WORKER_WEBHOOK_MAX_BODY": "10B"},
			want: []Problem{{"worker.webhook_max_body", `"10B" is under 1KiB, smaller than any push event; want a size such as 1MiB (from MESHROLL_WORKER_WEBHOOK_MAX_BODY)`}},
		},
		{
			name: "temporal ui url without a scheme",
			src:  "worker: {}\n",
			env:  map[string]string{"MESHROLL_TEMPORAL_UI_URL": "temporal.example.com"},
			want: []Problem{{"temporal.ui_url", `"temporal.example.com" is not an http or https URL with a host; want the Temporal Web UI's base URL, such as https://temporal.example.com (from MESHROLL_TEMPORAL_UI_URL)`}},
		},
		{
			name: "otlp endpoint without a scheme",
			src:  "worker:\n  tracing:\n    otlp_endpoint: otel:4318\n",
			want: []Problem{{"worker.tracing.otlp_endpoint", `"otel:4318" is not an http or https URL; want the OTLP/HTTP collector's URL, such as http://otel-collector:4318 (line 9)`}},
		},
		{
			name: "otlp endpoint without a host",
			src:  "worker:\n  tracing:\n    otlp_endpoint: 'http://'\n",
			want: []Problem{{"worker.tracing.otlp_endpoint", `"http:" has no host; want the OTLP/HTTP collector's URL, such as http://otel-collector:4318 (line 9)`}},
		},
		{
			name: "versioning enabled is not a boolean",
			src:  "worker:\n  versioning:\n    enabled: sometimes\n",
			want: []Problem{{"worker.versioning.enabled", `must be true or false, got "sometimes" (line 9)`}},
		},
		{
			name: "deployment name with a dot",
			src:  "worker:\n  versioning: {enabled: true, deployment_name: mesh.prod}\n",
			want: []Problem{{"worker.versioning.deployment_name", `"mesh.prod" contains a dot, which Temporal puts between the deployment name and the build ID (line 8)`}},
		},
		{
			name: "reserved deployment name",
			src:  "worker:\n  versioning:\n    deployment_name: __meshroll\n",
			want: []Problem{{"worker.versioning.deployment_name", `"__meshroll" starts with __, which Temporal reserves (line 9)`}},
		},
		{
			name: "build id with spaces",
			env:  map[string]string{"MESHROLL_WORKER_VERSIONING_BUILD_ID": "build 7"},
			want: []Problem{{"worker.versioning.build_id", `"build 7" contains spaces (from MESHROLL_WORKER_VERSIONING_BUILD_ID)`}},
		},
		{
			name: "unknown key under worker",
			src:  "worker:\n  metrics_port: 9090\n",
			want: []Problem{{"worker.metrics_port", "unknown key; known keys: metrics_listen, ui_listen, ui_token, ui_token_file, webhook_listen, webhook_secret, webhook_secret_file, webhook_max_body, enroll_listen, enroll_token, enroll_token_file, tracing, versioning (line 8)"}},
		},
		{
			name: "unknown key under versioning",
			src:  "worker:\n  versioning: {enable: true}\n",
			want: []Problem{{"worker.versioning.enable", "unknown key; known keys: enabled, deployment_name, build_id (line 8)"}},
		},
		{
			name: "worker is not a mapping",
			src:  "worker: on\n",
			want: []Problem{{"worker", "must be a mapping of metrics_listen, ui_listen, ui_token, ui_token_file, webhook_listen, webhook_secret, webhook_secret_file, webhook_max_body, enroll_listen, enroll_token, enroll_token_file, tracing, versioning, got \"on\" (line 7)"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			assert.Equal(t, tc.want, problemsOf(t, valid+tc.src))
		})
	}
}

// Beyond loopback the fleet page needs a token, from the environment or a
// file; on loopback it needs none.
func TestFleetPageListenWithToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		env  map[string]string
	}{
		{name: "loopback, no token", src: "worker: {ui_listen: '127.0.0.1:8234'}\n"},
		{name: "localhost, no token", src: "worker: {ui_listen: 'localhost:8234'}\n"},
		{name: "IPv6 loopback, no token", src: "worker: {ui_listen: '[::1]:8234'}\n"},
		{name: "every interface, token from the environment", src: "worker: {ui_listen: ':8234'}\n", env: map[string]string{"MESHROLL_WORKER_UI_TOKEN": "s3cret"}},
		{name: "network address, token file", src: "worker: {ui_listen: '10.0.0.5:8234', ui_token_file: /run/secrets/ui}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			assert.Empty(t, problemsOf(t, valid+tc.src))
		})
	}
}

func TestFleetToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ui-token")
	require.NoError(t, os.WriteFile(file, []byte("  from-file\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))

	tok, err := Worker{UIToken: "direct"}.FleetToken()
	require.NoError(t, err)
	assert.Equal(t, "direct", tok.Reveal())
	tok, err = Worker{UITokenFile: file}.FleetToken()
	require.NoError(t, err)
	assert.Equal(t, "from-file", tok.Reveal(), "white space around the token is not part of it")
	tok, err = Worker{}.FleetToken()
	require.NoError(t, err)
	assert.Empty(t, tok)
	_, err = Worker{UITokenFile: empty}.FleetToken()
	assert.ErrorContains(t, err, "worker.ui_token_file "+empty+" is empty")
	_, err = Worker{UITokenFile: filepath.Join(dir, "missing")}.FleetToken()
	assert.ErrorContains(t, err, "worker.ui_token_file: open ")
}

// The merge receiver's secret comes from the key or a file read when asked;
// its body cap defaults when unset.
func TestWebhookKeyAndLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hook")
	require.NoError(t, os.WriteFile(file, []byte("  from-file\n"), 0o600))
	for _, tc := range []struct {
		name    string
		w       Worker
		key     string
		limit   int64
		wantErr string
	}{
		{name: "nothing set", limit: 1 << 20},
		{name: "secret", w: Worker{WebhookSecret: "s3cret", WebhookMaxBody: "64KiB"}, key: "s3cret", limit: 64 << 10},
		{name: "file", w: Worker{WebhookSecretFile: file}, key: "from-file", limit: 1 << 20},
		{name: "missing file", w: Worker{WebhookSecretFile: file + ".gone"}, limit: 1 << 20, wantErr: "worker.webhook_secret_file: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := tc.w.WebhookKey()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.key, key.Reveal())
			}
			assert.Equal(t, tc.limit, tc.w.WebhookBodyLimit())
		})
	}
}
