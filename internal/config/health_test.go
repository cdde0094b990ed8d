package config

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

// healthMesh is a valid mesh with the host module's health on line 5 and
// two machines on tier 1, formatted with the health value and what follows
// the machines (a tiers section, from line 10).
const healthMesh = `modules:
  mesh-controller: {repo: ., control_plane: true}
  host:
    repo: .
    health: %s
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 2, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}
  edge-2: {host: http://127.0.0.1:7402, tier: 1, modules: [host]}
%s`

// defaultWire is DefaultHealth on the wire.
var defaultWire = mesh.Health{IntervalMS: 1000, TimeoutMS: 1000, MinHealthyMS: 10_000, DeadlineMS: 300_000}

func TestHealthDefaults(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(valid))
	require.NoError(t, err)
	for _, name := range c.ModuleNames() {
		assert.Equal(t, defaultWire, c.Modules[name].HealthCheck(), "module %s has no health key", name)
	}
	assert.Equal(t, defaultWire, Module{}.HealthCheck(), "a module built in code without Health")
}

func TestHealthKeys(t *testing.T) {
	for _, tc := range []struct {
		name, health string
		env          map[string]string
		want         mesh.Health
	}{
		{
			name:   "http probe with every time",
			health: "{http: {port: 8080, path: /healthz}, interval: 500ms, timeout: 2s, min_healthy: 1.5s, deadline: 1m}",
			want:   mesh.Health{HTTP: &mesh.HTTPProbe{Port: 8080, Path: "/healthz"}, IntervalMS: 500, TimeoutMS: 2000, MinHealthyMS: 1500, DeadlineMS: 60_000},
		},
		{
			name:   "http path defaults to /",
			health: "{http: {port: auto}}",
			want:   withProbe(func(h *mesh.Health) { h.HTTP = &mesh.HTTPProbe{Port: mesh.PortAuto, Path: "/"} }),
		},
		{
			name:   "tcp probe on a port the agent picks",
			health: "{tcp: {port: auto}}",
			want:   withProbe(func(h *mesh.Health) { h.TCP = &mesh.TCPProbe{Port: mesh.PortAuto} }),
		},
		{
			name:   "exec probe",
			health: `{exec: [/bin/sh, -c, "test -e /var/run/web.ok"]}`,
			want:   withProbe(func(h *mesh.Health) { h.Exec = []string{"/bin/sh", "-c", "test -e /var/run/web.ok"} }),
		},
		{
			name:   "times only, the rest default",
			health: "{min_healthy: 0s, deadline: 1m}",
			want:   mesh.Health{IntervalMS: 1000, TimeoutMS: 1000, MinHealthyMS: 0, DeadlineMS: 60_000},
		},
		{
			name:   "empty health",
			health: "{}",
			want:   defaultWire,
		},
		{
			name:   "a probe and a time from the environment",
			health: "",
			env: map[string]string{
				"MESHROLL_MODULES_HOST_HEALTH_TCP_PORT":    "7000",
				"MESHROLL_MODULES_HOST_HEALTH_MIN_HEALTHY": "2s",
			},
			want: mesh.Health{TCP: &mesh.TCPProbe{Port: 7000}, IntervalMS: 1000, TimeoutMS: 1000, MinHealthyMS: 2000, DeadlineMS: 300_000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Parse("mesh.yaml", fmt.Appendf(nil, healthMesh, tc.health, ""))
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Modules["host"].HealthCheck())
			assert.Equal(t, defaultWire, c.Modules["mesh-controller"].HealthCheck(), "the other module keeps the defaults")
		})
	}
}

// withProbe is DefaultHealth on the wire with a probe set by set.
func withProbe(set func(*mesh.Health)) mesh.Health {
	h := defaultWire
	set(&h)
	return h
}

func TestHealthCheckSharesNothing(t *testing.T) {
	m := Module{Health: &Health{
		HTTP: &mesh.HTTPProbe{Port: 1, Path: "/"}, TCP: &mesh.TCPProbe{Port: 2}, Exec: []string{"true"},
		Interval: time.Second, Timeout: time.Second, Deadline: time.Second,
	}}
	h := m.HealthCheck()
	h.HTTP.Port, h.TCP.Port, h.Exec[0] = 9, 9, "false"
	assert.Equal(t, &Health{
		HTTP: &mesh.HTTPProbe{Port: 1, Path: "/"}, TCP: &mesh.TCPProbe{Port: 2}, Exec: []string{"true"},
		Interval: time.Second, Timeout: time.Second, Deadline: time.Second,
	}, m.Health)
}

// meshCase is healthMesh with a health value ("{}" when empty), a tiers
// section and variables, and the problems it has.
type meshCase struct {
	name, health, tiers string
	env                 map[string]string
	want                []Problem
}

func checkMeshCases(t *testing.T, cases []meshCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			health := tc.health
			if health == "" {
				health = "{}"
			}
			src := fmt.Sprintf(healthMesh, health, tc.tiers)
			assert.Equal(t, tc.want, problemsOf(t, src), "problems of:\n%s", src)
		})
	}
}

// TestHealthProblems has one case per rule: each problem names its key and
// its line.
func TestHealthProblems(t *testing.T) {
	checkMeshCases(t, []meshCase{
		{
			name:   "http and tcp",
			health: "{http: {port: 80}, tcp: {port: 81}}",
			want:   []Problem{{"modules.host.health", "has http and tcp probes; a container is judged by one, so keep one (line 5)"}},
		},
		{
			name:   "http, tcp and exec",
			health: "{http: {port: 80}, tcp: {port: 81}, exec: [true]}",
			want:   []Problem{{"modules.host.health", "has http, tcp and exec probes; a container is judged by one, so keep one (line 5)"}},
		},
		{
			name:   "tcp and exec",
			health: "{tcp: {port: 81}, exec: [true]}",
			want:   []Problem{{"modules.host.health", "has tcp and exec probes; a container is judged by one, so keep one (line 5)"}},
		},
		{
			name:   "port 0",
			health: "{http: {port: 0}}",
			want:   []Problem{{"modules.host.health.http.port", "must be a port 1-65535, or auto for one the host agent picks per container and passes as MESHROLL_PORT, got 0 (line 5)"}},
		},
		{
			name:   "negative port",
			health: "{tcp: {port: -1}}",
			want:   []Problem{{"modules.host.health.tcp.port", "must be a port 1-65535, or auto for one the host agent picks per container and passes as MESHROLL_PORT, got -1 (line 5)"}},
		},
		{
			name:   "port above 65535",
			health: "{http: {port: 65536}}",
			want:   []Problem{{"modules.host.health.http.port", "must be a port 1-65535, or auto for one the host agent picks per container and passes as MESHROLL_PORT, got 65536 (line 5)"}},
		},
		{
			name:   "port a word other than auto",
			health: "{tcp: {port: http}}",
			want:   []Problem{{"modules.host.health.tcp.port", `must be a port 1-65535, or auto for one the host agent picks per container and passes as MESHROLL_PORT, got "http" (line 5)`}},
		},
		{
			name:   "port from the environment",
			health: "{tcp: {port: 80}}",
			env:    map[string]string{"MESHROLL_MODULES_HOST_HEALTH_TCP_PORT": "eighty"},
			want:   []Problem{{"modules.host.health.tcp.port", `must be a port 1-65535, or auto for one the host agent picks per container and passes as MESHROLL_PORT, got "eighty" (from MESHROLL_MODULES_HOST_HEALTH_TCP_PORT)`}},
		},
		{
			name:   "port missing",
			health: "{http: {path: /healthz}}",
			want:   []Problem{{"modules.host.health.http.port", "missing; give the port the container serves, 1-65535, or auto for one the host agent picks per container and passes as MESHROLL_PORT (line 5)"}},
		},
		{
			name:   "http path without a slash",
			health: "{http: {port: 80, path: healthz}}",
			want:   []Problem{{"modules.host.health.http.path", `must start with /, such as /healthz, got "healthz" (line 5)`}},
		},
		{
			name:   "exec with an empty argv",
			health: "{exec: []}",
			want:   []Problem{{"modules.host.health.exec", `names no command; give the command and its arguments, such as [/bin/sh, -c, "test -e /run/ok"], or remove exec (line 5)`}},
		},
		{
			name:   "exec with an empty command",
			health: `{exec: ["", x]}`,
			want:   []Problem{{"modules.host.health.exec", `names no command; give the command and its arguments, such as [/bin/sh, -c, "test -e /run/ok"], or remove exec (line 5)`}},
		},
		{
			name:   "durations that do not parse",
			health: "\n      interval: soon\n      timeout: 5\n      min_healthy: [10s]\n      deadline: 1 minute",
			want: []Problem{
				{"modules.host.health.deadline", `must be a duration such as 90s or 5m, got "1 minute" (line 9)`},
				{"modules.host.health.interval", `must be a duration such as 90s or 5m, got "soon" (line 6)`},
				{"modules.host.health.min_healthy", "must be a duration such as 90s or 5m, got a list (line 8)"},
				{"modules.host.health.timeout", "must be a duration such as 90s or 5m, got 5 (line 7)"},
			},
		},
		{
			name:   "zero interval, timeout and deadline",
			health: "{interval: 0s, timeout: 0s, min_healthy: 0s, deadline: 0s}",
			want: []Problem{
				{"modules.host.health.deadline", "must be a duration of at least 1ms, such as 1s, got 0s (line 5)"},
				{"modules.host.health.interval", "must be a duration of at least 1ms, such as 1s, got 0s (line 5)"},
				{"modules.host.health.timeout", "must be a duration of at least 1ms, such as 1s, got 0s (line 5)"},
			},
		},
		{
			name:   "negative durations",
			health: "{interval: -1s, timeout: 500us, min_healthy: -10s, deadline: -1m}",
			want: []Problem{
				{"modules.host.health.deadline", "must be a duration of at least 1ms, such as 1s, got -1m0s (line 5)"},
				{"modules.host.health.interval", "must be a duration of at least 1ms, such as 1s, got -1s (line 5)"},
				{"modules.host.health.min_healthy", "must be a duration of 0s or more, such as 10s, got -10s (line 5)"},
				{"modules.host.health.timeout", "must be a duration of at least 1ms, such as 1s, got 500µs (line 5)"},
			},
		},
		{
			name:   "min_healthy above deadline",
			health: "\n      min_healthy: 2m\n      deadline: 1m",
			want:   []Problem{{"modules.host.health.min_healthy", "2m0s is longer than deadline 1m0s, so no container could count healthy in time; lower min_healthy or raise deadline (line 6)"}},
		},
		{
			name:   "min_healthy above the default deadline",
			health: "{min_healthy: 10m}",
			want:   []Problem{{"modules.host.health.min_healthy", "10m0s is longer than deadline 5m0s, so no container could count healthy in time; lower min_healthy or raise deadline (line 5)"}},
		},
		{
			name:   "unknown keys",
			health: "{http: {port: 80, scheme: https}, grace: 1s}",
			want: []Problem{
				{"modules.host.health.grace", "unknown key; known keys: http, tcp, exec, interval, timeout, min_healthy, deadline (line 5)"},
				{"modules.host.health.http.scheme", "unknown key; known keys: port, path (line 5)"},
			},
		},
		{
			name:   "values of the wrong shape",
			health: "{http: 8080, exec: /bin/true}",
			want: []Problem{
				{"modules.host.health.exec", `must be a list, such as [a, b], got "/bin/true" (line 5)`},
				{"modules.host.health.http", "must be a mapping of port, path, got 8080 (line 5)"},
			},
		},
		{
			name:   "health not a mapping",
			health: "yes",
			want:   []Problem{{"modules.host.health", `must be a mapping of http, tcp, exec, interval, timeout, min_healthy, deadline, got "yes" (line 5)`}},
		},
	})
}

func TestHealthBuiltInCode(t *testing.T) {
	c := Default()
	c.Modules["host"] = Module{Repo: ".", Health: &Health{
		HTTP: &mesh.HTTPProbe{Port: 70000}, Interval: time.Second, Timeout: time.Second, MinHealthy: time.Second, Deadline: time.Second,
	}}
	c.Machines["edge-1"] = Machine{Host: "http://127.0.0.1:7401", Tier: 1, Modules: []string{"host"}}
	assert.EqualError(t, c.Validate(), "mesh config: 2 problems:\n"+
		"  modules.host.health.http.path: must start with /, such as /healthz, got \"\"\n"+
		"  modules.host.health.http.port: must be a port 1-65535, or auto for one the host agent picks per container and passes as MESHROLL_PORT, got 70000")

	c.Modules["host"] = Module{Repo: "."}
	assert.NoError(t, c.Validate(), "a module without Health")
}
