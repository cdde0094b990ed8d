package config

import (
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
  tracing: {otlp_endpoint: "http://otel:4318", service_name: mesh-w}
  versioning: {enabled: true, deployment_name: mesh-prod, build_id: 8dadda9}
`,
			want: Worker{
				MetricsListen: "127.0.0.1:9090",
				Tracing:       Tracing{OTLPEndpoint: "http://otel:4318", ServiceName: "mesh-w"},
				Versioning:    Versioning{Enabled: true, DeploymentName: "mesh-prod", BuildID: "8dadda9"},
			},
		},
		{
			name: "every key from the environment",
			env: map[string]string{
				"MESHROLL_WORKER_METRICS_LISTEN":             ":9464",
				"MESHROLL_WORKER_TRACING_OTLP_ENDPOINT":      "https://otel.internal:4318",
				"MESHROLL_WORKER_VERSIONING_ENABLED":         "true",
				"MESHROLL_WORKER_VERSIONING_DEPLOYMENT_NAME": "mesh-env",
				"MESHROLL_WORKER_VERSIONING_BUILD_ID":        "build-7",
			},
			want: Worker{
				MetricsListen: ":9464",
				Tracing:       Tracing{OTLPEndpoint: "https://otel.internal:4318", ServiceName: DefaultTracingServiceName},
				Versioning:    Versioning{Enabled: true, DeploymentName: "mesh-env", BuildID: "build-7"},
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
			want: []Problem{{"worker.metrics_port", "unknown key; known keys: metrics_listen, tracing, versioning (line 8)"}},
		},
		{
			name: "unknown key under versioning",
			src:  "worker:\n  versioning: {enable: true}\n",
			want: []Problem{{"worker.versioning.enable", "unknown key; known keys: enabled, deployment_name, build_id (line 8)"}},
		},
		{
			name: "worker is not a mapping",
			src:  "worker: on\n",
			want: []Problem{{"worker", "must be a mapping of metrics_listen, tracing, versioning, got \"on\" (line 7)"}},
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
