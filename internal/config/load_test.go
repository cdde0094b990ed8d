package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/secret"
)

// overlayMesh has every section, so that a variable can override any key
// of it, and names with '.' and '-' in them.
const overlayMesh = `temporal: {address: 127.0.0.1:7233}
modules:
  host: {repo: ., path: examples/host, env: {LOG_LEVEL: info}, health: {http: {port: 8080}}}
  ctl: {repo: ., control_plane: true}
machines:
  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}
  web.prod-2: {host: http://127.0.0.1:7402, tier: 1, modules: [host]}
  control-node: {host: http://127.0.0.1:7400, tier: 2, modules: [ctl, host]}
tiers:
  1: {analysis: [c, d]}
analysis:
  providers:
    prom: {prometheus: {address: http://127.0.0.1:9090, basic_auth: {username: u}, tls: {ca_file: ca.pem}}}
    plain: {prometheus: {address: http://127.0.0.1:9091}}
    api: {web: {url: "https://status.internal/{{.Module}}", headers: {X-Api-Key: k}}}
  checks:
    c: {provider: prom, query: up, success: result == 1}
    d: {provider: plain, query: up, success: result == 1}
`

// TestEnvOverlayEveryKey sets, one case at a time, the variable of every
// key the file can give, by the name the overlay has always used for it
// (MESHROLL_ and the key's parts joined by '_', in upper case, with '.'
// and '-' as '_'), and finds its value in the config.
func TestEnvOverlayEveryKey(t *testing.T) {
	mod := func(c *Config) Module { return c.Modules["host"] }
	ctl := func(c *Config) Module { return c.Modules["ctl"] }
	edge := func(c *Config) Machine { return c.Machines["edge-1"] }
	prom := func(c *Config) *Prometheus { return c.Analysis.Providers["prom"].Prometheus }
	plain := func(c *Config) *Prometheus { return c.Analysis.Providers["plain"].Prometheus }
	web := func(c *Config) *Web { return c.Analysis.Providers["api"].Web }
	check := func(c *Config) Check { return c.Analysis.Checks["c"] }
	for _, tc := range []struct {
		env  map[string]string
		get  func(c *Config) any
		want any
	}{
		{map[string]string{"MESHROLL_TEMPORAL_ADDRESS": "t.example:7233"}, func(c *Config) any { return c.Temporal.Address }, "t.example:7233"},
		{map[string]string{"MESHROLL_TEMPORAL_NAMESPACE": "ns"}, func(c *Config) any { return c.Temporal.Namespace }, "ns"},
		{map[string]string{"MESHROLL_TEMPORAL_TASK_QUEUE": "q"}, func(c *Config) any { return c.Temporal.TaskQueue }, "q"},
		{map[string]string{"MESHROLL_TEMPORAL_API_KEY": "k3y"}, func(c *Config) any { return c.Temporal.APIKey }, secret.String("k3y")},
		{map[string]string{"MESHROLL_TEMPORAL_GRPC_COMPRESSION": "gzip"}, func(c *Config) any { return c.Temporal.GrpcCompression }, "gzip"},
		{map[string]string{"MESHROLL_TEMPORAL_UI_URL": "https://t.example"}, func(c *Config) any { return c.Temporal.UIURL }, "https://t.example"},
		{map[string]string{"MESHROLL_TEMPORAL_TLS_CA_FILE": "ca.pem", "MESHROLL_TEMPORAL_TLS_CERT_FILE": "c.pem", "MESHROLL_TEMPORAL_TLS_KEY_FILE": "k.pem", "MESHROLL_TEMPORAL_TLS_SERVER_NAME": "t", "MESHROLL_TEMPORAL_TLS_ENABLED": "true"},
			func(c *Config) any { return c.Temporal.TLS }, TemporalTLS{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", ServerName: "t", Enabled: true}},
		{map[string]string{"MESHROLL_STATE_DIR": "/var/lib/m"}, func(c *Config) any { return c.StateDir }, "/var/lib/m"},
		{map[string]string{"MESHROLL_PUSH_RUNNING_TIMEOUT": "90s", "MESHROLL_PUSH_RETRY_BUDGET": "1m", "MESHROLL_PUSH_LOCAL_ACTIVITY": "true", "MESHROLL_PUSH_RELAY_ABOVE": "200", "MESHROLL_PUSH_REHAND_AFTER": "30s", "MESHROLL_PUSH_HAND_WINDOW": "300"},
			func(c *Config) any { return c.Push }, Push{RunningTimeout: 90 * time.Second, RetryBudget: time.Minute, LocalActivity: true, RelayAbove: 200, RehandAfter: 30 * time.Second, HandWindow: 300}},
		{map[string]string{"MESHROLL_CATALOGUE_DSN": "postgres://db/m"}, func(c *Config) any { return c.Catalogue.DSN }, "postgres://db/m"},
		{map[string]string{"MESHROLL_REGISTRY_ADDRESS": "reg:5000", "MESHROLL_REGISTRY_USERNAME": "u", "MESHROLL_REGISTRY_PASSWORD": "p", "MESHROLL_REGISTRY_INSECURE": "true",
			"MESHROLL_REGISTRY_CA_FILE": "ca.pem", "MESHROLL_REGISTRY_REPOSITORY": "r", "MESHROLL_REGISTRY_LISTEN": ":5001"},
			func(c *Config) any { return c.Registry }, Registry{Address: "reg:5000", Username: "u", Password: "p", Insecure: true, CAFile: "ca.pem", Repository: "r", Listen: ":5001"}},
		{map[string]string{"MESHROLL_REGISTRY_TOKEN": "t"}, func(c *Config) any { return c.Registry.Token }, secret.String("t")},
		{map[string]string{"MESHROLL_MODULES_HOST_REPO": "/srv/mesh"}, func(c *Config) any { return mod(c).Repo }, "/srv/mesh"},
		{map[string]string{"MESHROLL_MODULES_HOST_PATH": "h"}, func(c *Config) any { return mod(c).Path }, "h"},
		{map[string]string{"MESHROLL_MODULES_HOST_SOURCE": "https://git.example/m"}, func(c *Config) any { return mod(c).Source }, "https://git.example/m"},
		{map[string]string{"MESHROLL_MODULES_CTL_CONTROL_PLANE": "false"}, func(c *Config) any { return ctl(c).ControlPlane }, false},
		{map[string]string{"MESHROLL_MODULES_HOST_MAIN": "./cmd/h"}, func(c *Config) any { return mod(c).Main }, "./cmd/h"},
		{map[string]string{"MESHROLL_MODULES_HOST_BUILDER": "command", "MESHROLL_MODULES_HOST_COMMAND": "ko,build"},
			func(c *Config) any { return []any{mod(c).Builder, mod(c).Command} }, []any{"command", []string{"ko", "build"}}},
		{map[string]string{"MESHROLL_MODULES_HOST_BRANCH": "trunk"}, func(c *Config) any { return mod(c).Branch }, "trunk"},
		{map[string]string{"MESHROLL_MODULES_HOST_DIGEST_FILE": "d"}, func(c *Config) any { return mod(c).DigestFile }, "d"},
		{map[string]string{"MESHROLL_MODULES_HOST_ARGS": "-v --x"}, func(c *Config) any { return mod(c).Args }, []string{"-v", "--x"}},
		{map[string]string{"MESHROLL_MODULES_HOST_ENV_LOG_LEVEL": "debug"}, func(c *Config) any { return mod(c).Env }, map[string]string{"LOG_LEVEL": "debug"}},
		{map[string]string{"MESHROLL_MODULES_HOST_HEALTH_INTERVAL": "2s", "MESHROLL_MODULES_HOST_HEALTH_TIMEOUT": "3s", "MESHROLL_MODULES_HOST_HEALTH_MIN_HEALTHY": "4s",
			"MESHROLL_MODULES_HOST_HEALTH_DEADLINE": "5s", "MESHROLL_MODULES_HOST_HEALTH_HTTP_PORT": "auto", "MESHROLL_MODULES_HOST_HEALTH_HTTP_PATH": "/ok"},
			func(c *Config) any { return mod(c).Health },
			&Health{HTTP: &mesh.HTTPProbe{Port: mesh.PortAuto, Path: "/ok"}, Interval: 2 * time.Second, Timeout: 3 * time.Second, MinHealthy: 4 * time.Second, Deadline: 5 * time.Second}},
		{map[string]string{"MESHROLL_MODULES_CTL_HEALTH_TCP_PORT": "7000"}, func(c *Config) any { return ctl(c).Health.TCP }, &mesh.TCPProbe{Port: 7000}},
		{map[string]string{"MESHROLL_MODULES_CTL_HEALTH_EXEC": "/bin/true"}, func(c *Config) any { return ctl(c).Health.Exec }, []string{"/bin/true"}},
		{map[string]string{"MESHROLL_MACHINES_EDGE_1_HOST": "https://10.0.0.9:7400", "MESHROLL_MACHINES_EDGE_1_TIER": "0", "MESHROLL_MACHINES_EDGE_1_MODULES": "host",
			"MESHROLL_MACHINES_EDGE_1_TOKEN": "t0k", "MESHROLL_MACHINES_EDGE_1_CA_FILE": "ca.pem"},
			func(c *Config) any { return edge(c) }, Machine{Host: "https://10.0.0.9:7400", Tier: 0, Modules: []string{"host"}, Token: "t0k", CAFile: "ca.pem"}},
		{map[string]string{"MESHROLL_MACHINES_WEB_PROD_2_TOKEN": "t0k"}, func(c *Config) any { return c.Machines["web.prod-2"].Token }, secret.String("t0k")},
		{map[string]string{"MESHROLL_TIERS_1_MAX_PARALLEL": "50%", "MESHROLL_TIERS_1_MAX_FAILED": "1", "MESHROLL_TIERS_1_BAKE": "5m", "MESHROLL_TIERS_1_ANALYSIS": "d, c"},
			func(c *Config) any { return c.Tiers[1] }, TierPolicy{MaxParallel: Amount{N: 50, Percent: true}, MaxFailed: Amount{N: 1}, Bake: 5 * time.Minute, Analysis: []string{"d", "c"}}},
		{map[string]string{"MESHROLL_WORKER_METRICS_LISTEN": ":9464", "MESHROLL_WORKER_UI_LISTEN": "127.0.0.1:8234", "MESHROLL_WORKER_UI_TOKEN": "s3cret",
			"MESHROLL_WORKER_TRACING_OTLP_ENDPOINT": "http://otel:4318", "MESHROLL_WORKER_TRACING_SERVICE_NAME": "w",
			"MESHROLL_WORKER_VERSIONING_ENABLED": "true", "MESHROLL_WORKER_VERSIONING_DEPLOYMENT_NAME": "d", "MESHROLL_WORKER_VERSIONING_BUILD_ID": "b"},
			func(c *Config) any { return c.Worker }, Worker{MetricsListen: ":9464", UIListen: "127.0.0.1:8234", UIToken: "s3cret",
				Tracing: Tracing{OTLPEndpoint: "http://otel:4318", ServiceName: "w"}, Versioning: Versioning{Enabled: true, DeploymentName: "d", BuildID: "b"}}},
		{map[string]string{"MESHROLL_WORKER_UI_TOKEN_FILE": "/run/ui"}, func(c *Config) any { return c.Worker.UITokenFile }, "/run/ui"},
		{map[string]string{"MESHROLL_ANALYSIS_PROVIDERS_PROM_PROMETHEUS_ADDRESS": "https://p:9090", "MESHROLL_ANALYSIS_PROVIDERS_PROM_PROMETHEUS_BASIC_AUTH_USERNAME": "ops",
			"MESHROLL_ANALYSIS_PROVIDERS_PROM_PROMETHEUS_BASIC_AUTH_PASSWORD": "pw", "MESHROLL_ANALYSIS_PROVIDERS_PROM_PROMETHEUS_TLS_CA_FILE": "p.pem",
			"MESHROLL_ANALYSIS_PROVIDERS_PROM_PROMETHEUS_TLS_INSECURE_SKIP_VERIFY": "true"},
			func(c *Config) any { return prom(c) }, &Prometheus{Address: "https://p:9090", BasicAuth: &BasicAuth{Username: "ops", Password: "pw"}, TLS: &ProviderTLS{CAFile: "p.pem", InsecureSkipVerify: true}}},
		{map[string]string{"MESHROLL_ANALYSIS_PROVIDERS_PLAIN_PROMETHEUS_BEARER_TOKEN": "t"}, func(c *Config) any { return plain(c).BearerToken }, secret.String("t")},
		{map[string]string{"MESHROLL_ANALYSIS_PROVIDERS_PLAIN_PROMETHEUS_BEARER_TOKEN_FILE": "/run/t"}, func(c *Config) any { return plain(c).BearerTokenFile }, "/run/t"},
		{map[string]string{"MESHROLL_ANALYSIS_PROVIDERS_API_WEB_URL": "https://s/{{.Tier}}", "MESHROLL_ANALYSIS_PROVIDERS_API_WEB_JSON_PATH": "$.ok", "MESHROLL_ANALYSIS_PROVIDERS_API_WEB_HEADERS_X_API_KEY": "v"},
			func(c *Config) any { return web(c) }, &Web{URL: "https://s/{{.Tier}}", JSONPath: "$.ok", Headers: map[string]secret.String{"X-Api-Key": "v"}}},
		{map[string]string{"MESHROLL_ANALYSIS_CHECKS_C_PROVIDER": "plain", "MESHROLL_ANALYSIS_CHECKS_C_QUERY": "up{a=\"b\"}", "MESHROLL_ANALYSIS_CHECKS_C_SUCCESS": "result < 1",
			"MESHROLL_ANALYSIS_CHECKS_C_INTERVAL": "30s", "MESHROLL_ANALYSIS_CHECKS_C_COUNT": "3", "MESHROLL_ANALYSIS_CHECKS_C_FAILURE_LIMIT": "1",
			"MESHROLL_ANALYSIS_CHECKS_C_INITIAL_DELAY": "1m", "MESHROLL_ANALYSIS_CHECKS_C_DRY_RUN": "true"},
			func(c *Config) any { return check(c) }, Check{Provider: "plain", Query: `up{a="b"}`, Success: "result < 1", Interval: 30 * time.Second, Count: 3, FailureLimit: 1, InitialDelay: time.Minute, DryRun: true}},
	} {
		var names []string
		for k := range tc.env {
			names = append(names, k)
		}
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Parse("mesh.yaml", []byte(overlayMesh))
			require.NoError(t, err)
			assert.Equal(t, tc.want, tc.get(c))
		})
	}
}

// A key's variable is MESHROLL_ and its parts joined by '_', in upper case,
// with '.' and '-' as '_'; a name is one part, as written.
func TestEnvName(t *testing.T) {
	for parts, want := range map[[3]string]string{
		{"machines", "web.prod-2", "token"}:       "MESHROLL_MACHINES_WEB_PROD_2_TOKEN",
		{"modules", "Host", "env"}:                "MESHROLL_MODULES_HOST_ENV",
		{"analysis", "checks", "error-rate"}:      "MESHROLL_ANALYSIS_CHECKS_ERROR_RATE",
		{"worker", "versioning", "build_id"}:      "MESHROLL_WORKER_VERSIONING_BUILD_ID",
		{"tiers", "1", "max_parallel"}:            "MESHROLL_TIERS_1_MAX_PARALLEL",
		{"temporal", "tls", "insecure"}:           "MESHROLL_TEMPORAL_TLS_INSECURE",
		{"machines", "edge-1.a_b", "ca_file"}:     "MESHROLL_MACHINES_EDGE_1_A_B_CA_FILE",
		{"modules", "host", "health"}:             "MESHROLL_MODULES_HOST_HEALTH",
		{"analysis", "providers", "prom.eu-west"}: "MESHROLL_ANALYSIS_PROVIDERS_PROM_EU_WEST",
	} {
		assert.Equal(t, want, envName(parts[:]...), "%v", parts)
	}
}

// A key left out keeps its default, and a main written empty is the
// default too.
func TestEmptyMainIsTheDefault(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(strings.Replace(valid, "path: examples/host}", `path: examples/host, main: ""}`, 1)))
	require.NoError(t, err)
	assert.Equal(t, DefaultMain, c.Modules["host"].Main)
}

// What the file gives empty is there, with its defaults, for Validate to
// judge: a probe with no port, a provider's kind with nothing in it, a tier
// no machine is on, a module given as nothing.
func TestEmptySectionsAreThere(t *testing.T) {
	checkMeshCases(t, []meshCase{
		{
			name:   "an http probe with nothing in it",
			health: "{http: {}}",
			want:   []Problem{{"modules.host.health.http.port", "missing; give the port the container serves, " + portRule + " (line 5)"}},
		},
		{
			name:  "a web provider with nothing in it, basic auth with nothing in it",
			tiers: "tiers:\n  1: {analysis: [c]}\nanalysis:\n  providers:\n    p: {web: {}}\n    q: {prometheus: {address: http://127.0.0.1:9090, basic_auth: {}}}\n  checks:\n    c: {provider: p, success: result}\n",
			want: []Problem{
				{"analysis.providers.p.web.url", "missing; give the URL to fetch, a template such as https://status.internal/{{.Module}} (line 14)"},
				{"analysis.providers.q.prometheus.basic_auth.username", "missing; basic_auth needs a username (line 15)"},
			},
		},
		{
			name:  "a tier with nothing in it, and one given as nothing",
			tiers: "tiers:\n  3: {}\n  4:\n",
			want: []Problem{
				{"tiers.3", "no machine is on tier 3 (machines are on tiers 1, 2); fix the tier number or remove it (line 11)"},
				{"tiers.4", "no machine is on tier 4 (machines are on tiers 1, 2); fix the tier number or remove it (line 12)"},
			},
		},
		{
			name:  "a provider given as nothing",
			tiers: "tiers:\n  1: {analysis: [c]}\nanalysis:\n  providers:\n    p:\n  checks:\n    c: {provider: p, success: result}\n",
			want:  []Problem{{"analysis.providers.p", "has no kind; give prometheus: {address: ...} or web: {url: ...} (line 14)"}},
		},
	})
}

// A probe a variable gives is there, and so is its missing port.
func TestProbeFromAVariableOnly(t *testing.T) {
	checkMeshCases(t, []meshCase{{
		name: "http path from a variable",
		env:  map[string]string{"MESHROLL_MODULES_HOST_HEALTH_HTTP_PATH": "/ok"},
		want: []Problem{{"modules.host.health.http.port", "missing; give the port the container serves, " + portRule + " (line 5)"}},
	}})
}

// A machine given as nothing takes every key from variables.
func TestEntryGivenAsNothing(t *testing.T) {
	t.Setenv("MESHROLL_MACHINES_EDGE_1_HOST", "http://127.0.0.1:7401")
	t.Setenv("MESHROLL_MACHINES_EDGE_1_TIER", "1")
	t.Setenv("MESHROLL_MACHINES_EDGE_1_MODULES", "host")
	c, err := Parse("mesh.yaml", []byte(strings.Replace(valid, "edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}", "edge-1:", 1)))
	require.NoError(t, err)
	assert.Equal(t, Machine{Host: "http://127.0.0.1:7401", Tier: 1, Modules: []string{"host"}}, c.Machines["edge-1"])
}

// A machine used twice through an anchor is checked at each use.
func TestAnchorCheckedAtEachUse(t *testing.T) {
	src := `modules: {host: {repo: .}}
machines:
  a: &m {host: http://h:1, tier: 1, modules: [host], colour: blue}
  b: *m
`
	assert.Equal(t, []Problem{
		{"machines.a.colour", "unknown key; known keys: host, tier, labels, modules, token, ca_file, env (line 3)"},
		{"machines.b.colour", "unknown key; known keys: host, tier, labels, modules, token, ca_file, env (line 3)"},
	}, problemsOf(t, src))
}

// A file whose aliases expand without end is refused at once, not walked.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x0: &a0 {k: 1}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "x%d: &a%d {<<: [%s]}\n", i, i, strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9))
	}
	b.WriteString("modules: {host: {<<: *a9}}\n")
	start := time.Now()
	_, err := Parse("mesh.yaml", []byte(b.String()))
	require.ErrorContains(t, err, "excessive aliasing")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// An unknown key is not read, even one that differs from a known key only
// in case (viper lowercases keys).
func TestUnknownKeyIsNotRead(t *testing.T) {
	src := `modules: {host: {repo: .}}
machines:
  edge-1: {Host: http://h:1, tier: 1, modules: [host]}
`
	assert.Equal(t, []Problem{
		{"machines.edge-1.Host", "unknown key; known keys: host, tier, labels, modules, token, ca_file, env (line 3)"},
		{"machines.edge-1.host", "missing; want the host API's base URL, such as http://10.0.0.5:7400 (line 3)"},
	}, problemsOf(t, src))
}

// A window that is not a mapping keeps its place, so that the problems of
// the windows after it name their own index.
func TestWindowsKeepTheirIndex(t *testing.T) {
	ps := problemsOf(t, valid+"windows: [3, {deny: \"0 18 * * FRY\", duration: 1h}]\n")
	require.Len(t, ps, 2)
	assert.Equal(t, Problem{"windows[0]", "must be a mapping of allow, deny, duration, time_zone, reason, got 3 (line 7)"}, ps[0])
	assert.Equal(t, "windows[1].deny", ps[1].Key)
}

// A name is read as written, also one yaml would read as a number.
func TestNamesAsWritten(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(`modules:
  1.10: {repo: ., env: {A: 1.10}}
machines:
  00: {host: http://127.0.0.1:7401, tier: 1, modules: ["1.10"]}
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"00"}, c.MachineNames())
	assert.Equal(t, []string{"1.10"}, c.ModuleNames())
	assert.Equal(t, map[string]string{"A": "1.10"}, c.Modules["1.10"].Env)
}
