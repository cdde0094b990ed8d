package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
)

// valid is a small config that passes, for cases that change one thing.
const valid = `modules:
  mesh-controller: {repo: ., path: examples/controller, control_plane: true}
  host: {repo: ., path: examples/host}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 2, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}
`

// defaultHealth is what the loader gives a module that has no health key.
func defaultHealth() *Health {
	h := DefaultHealth()
	return &h
}

// problemsOf parses src and returns its problems (nil when it is valid).
func problemsOf(t *testing.T, src string) []Problem {
	t.Helper()
	_, err := Parse("mesh.yaml", []byte(src))
	if err == nil {
		return nil
	}
	var ve *ValidationError
	require.ErrorAs(t, err, &ve, "want a *ValidationError, got %v", err)
	assert.Equal(t, "mesh.yaml", ve.Path)
	return ve.Problems
}

// writeConfig writes src to a temporary mesh.yaml and returns its path.
func writeConfig(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mesh.yaml")
	require.NoError(t, os.WriteFile(p, []byte(src), 0o600))
	return p
}

func TestExampleFile(t *testing.T) {
	c, err := Load("testdata/mesh.yaml")
	require.NoError(t, err)
	require.NoError(t, c.Validate())

	for _, tc := range []struct {
		module string
		want   []meshapi.Target
	}{
		{"host", []meshapi.Target{
			{Machine: "edge-1", Tier: 1, Modules: []string{"host"}},
			{Machine: "control-node", Tier: 2, Modules: []string{"mesh-controller", "host"}, Alone: true},
		}},
		{"mesh-controller", []meshapi.Target{
			{Machine: "control-node", Tier: 2, Modules: []string{"mesh-controller", "host"}, Alone: true},
		}},
	} {
		got, err := c.Targets(tc.module)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "Targets(%q)", tc.module)
	}

	assert.Equal(t, []string{"host", "mesh-controller"}, c.ModuleNames())
	assert.Equal(t, []string{"control-node", "edge-1"}, c.MachineNames())
	assert.True(t, c.IsControlPlane("control-node"))
	assert.False(t, c.IsControlPlane("edge-1"))
	assert.False(t, c.IsControlPlane("no-such-machine"))
	assert.Equal(t, meshapi.DefaultPushPolicy, c.PushPolicy())
	assert.Equal(t, DefaultStateDir, c.StateDir)
	assert.Equal(t, Temporal{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "meshroll"}, c.Temporal)
	assert.Equal(t, Module{Repo: ".", Path: "examples/controller", ControlPlane: true, Main: ".", Health: defaultHealth()}, c.Modules["mesh-controller"])
}

func TestTargetsUnknownModule(t *testing.T) {
	c, err := Load("testdata/mesh.yaml")
	require.NoError(t, err)
	_, err = c.Targets("nope")
	require.ErrorIs(t, err, ErrUnknownModule)
	assert.Contains(t, err.Error(), `"nope"`)
}

func TestTargetsDoNotAlias(t *testing.T) {
	c, err := Load("testdata/mesh.yaml")
	require.NoError(t, err)
	got, err := c.Targets("mesh-controller")
	require.NoError(t, err)
	got[0].Modules[0] = "changed"
	assert.Equal(t, "mesh-controller", c.Machines["control-node"].Modules[0], "Targets must copy Modules")
}

func TestDefault(t *testing.T) {
	d := Default()
	assert.Equal(t, Temporal{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: meshapi.DefaultTaskQueue}, d.Temporal)
	assert.Equal(t, ".meshroll", d.StateDir)
	assert.Equal(t, Push{RunningTimeout: 5 * time.Minute, RetryBudget: 2 * time.Minute, RelayAbove: meshapi.RelayAbove, RehandAfter: meshapi.RehandAfter, HandWindow: meshapi.HandWindow}, d.Push)
	assert.Empty(t, d.Modules)
	assert.Empty(t, d.Machines)
	assert.Equal(t, meshapi.DefaultPushPolicy, d.PushPolicy())
}

func TestPushPolicyFillsZeroes(t *testing.T) {
	c := &Config{Push: Push{RetryBudget: time.Second}}
	assert.Equal(t, meshapi.PushPolicy{RunningTimeout: 5 * time.Minute, RetryBudget: time.Second}, c.PushPolicy())
}

func TestResolvePath(t *testing.T) {
	for _, tc := range []struct {
		name, flag, env, want string
	}{
		{"flag wins", "a.yaml", "b.yaml", "a.yaml"},
		{"env when no flag", "", "b.yaml", "b.yaml"},
		{"default", "", "", "mesh.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MESHROLL_CONFIG", tc.env)
			assert.Equal(t, tc.want, ResolvePath(tc.flag))
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	for _, tc := range []struct {
		name, flag, env string
	}{
		{"flag", missing, ""},
		{"MESHROLL_CONFIG", "", missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MESHROLL_CONFIG", tc.env)
			_, err := Load(tc.flag)
			require.ErrorIs(t, err, fs.ErrNotExist)
			for _, want := range []string{missing, "--config", "MESHROLL_CONFIG"} {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestLoadDefaultPath(t *testing.T) {
	t.Setenv("MESHROLL_CONFIG", "")
	t.Chdir(t.TempDir())
	_, err := Load("")
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "mesh config mesh.yaml not found")

	require.NoError(t, os.WriteFile("mesh.yaml", []byte(valid), 0o600))
	_, err = Load("")
	require.NoError(t, err)
}

func TestSyntaxError(t *testing.T) {
	_, err := Parse("mesh.yaml", []byte("modules: {host: [\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mesh config mesh.yaml:")
	var ve *ValidationError
	assert.False(t, errors.As(err, &ve), "a syntax error is not a list of problems")

	_, err = Parse("mesh.yaml", []byte("- a\n- b\n"))
	assert.EqualError(t, err, "mesh config mesh.yaml: line 1: the top level must be a mapping of temporal, state_dir, push, catalogue, registry, modules, machines, tiers, worker, analysis, windows, notify, enroll")
}

// TestDecodeAllFields fills every key, so that a field added to a struct
// without being read by the loader fails here.
func TestDecodeAllFields(t *testing.T) {
	src := `temporal:
  address: temporal.internal:7233
  namespace: mesh
  task_queue: mesh-q
state_dir: /var/lib/meshroll
push:
  running_timeout: 90s
  retry_budget: 1m30s
  local_activity: true
modules:
  mesh-controller:
    repo: git@example.com:meshroll/meshroll.git
    path: examples/controller
    control_plane: true
    main: ./cmd/controller
    args: [--verbose, "--port=7000", 3]
    env: {LOG_LEVEL: debug, MixedCase: "1", empty: ""}
    health:
      http: {port: 8080, path: /healthz}
      interval: 2s
      timeout: 3s
      min_healthy: 4s
      deadline: 5s
machines:
  control-node:
    host: https://10.0.0.1:7400
    tier: 1
    modules: [mesh-controller]
    token: t0ken
tiers:
  1: {max_parallel: 2, max_failed: 0, bake: 1m}
`
	c, err := Parse("mesh.yaml", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, Temporal{Address: "temporal.internal:7233", Namespace: "mesh", TaskQueue: "mesh-q"}, c.Temporal)
	assert.Equal(t, "/var/lib/meshroll", c.StateDir)
	assert.Equal(t, Push{RunningTimeout: 90 * time.Second, RetryBudget: 90 * time.Second, LocalActivity: true, RelayAbove: meshapi.RelayAbove, RehandAfter: meshapi.RehandAfter, HandWindow: meshapi.HandWindow}, c.Push)
	assert.Equal(t, map[string]Module{"mesh-controller": {
		Repo:         "git@example.com:meshroll/meshroll.git",
		Path:         "examples/controller",
		ControlPlane: true,
		Main:         "./cmd/controller",
		Args:         []string{"--verbose", "--port=7000", "3"},
		Env:          map[string]string{"LOG_LEVEL": "debug", "MixedCase": "1", "empty": ""},
		Health: &Health{
			HTTP:     &mesh.HTTPProbe{Port: 8080, Path: "/healthz"},
			Interval: 2 * time.Second, Timeout: 3 * time.Second, MinHealthy: 4 * time.Second, Deadline: 5 * time.Second,
		},
	}}, c.Modules)
	assert.Equal(t, map[string]Machine{"control-node": {
		Host: "https://10.0.0.1:7400", Tier: 1, Modules: []string{"mesh-controller"}, Token: "t0ken",
	}}, c.Machines)
	assert.Equal(t, map[int]TierPolicy{1: {MaxParallel: Amount{N: 2}, Bake: time.Minute}}, c.Tiers)
}

func TestDottedNamesAndAnchors(t *testing.T) {
	src := `modules:
  host.v2: {repo: ., path: examples/host}
machines:
  web.prod: &edge {host: http://10.0.0.1:7400, tier: 1, modules: [host.v2]}
  web.prod-2:
    <<: *edge
    host: http://10.0.0.2:7400
`
	t.Setenv("MESHROLL_MACHINES_WEB_PROD_2_TOKEN", "secret")
	c, err := Parse("mesh.yaml", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, map[string]Machine{
		"web.prod":   {Host: "http://10.0.0.1:7400", Tier: 1, Modules: []string{"host.v2"}},
		"web.prod-2": {Host: "http://10.0.0.2:7400", Tier: 1, Modules: []string{"host.v2"}, Token: "secret"},
	}, c.Machines)
}

func TestEnvOverrides(t *testing.T) {
	src := `temporal: {address: 127.0.0.1:7233}
modules:
  mesh-controller: {repo: ., path: examples/controller, control_plane: true}
  host:
    repo: .
    path: examples/host
    env: {LOG_LEVEL: info, Keep: this}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 2, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}
`
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c *Config)
	}{
		{
			name: "nested key present in the file",
			env:  map[string]string{"MESHROLL_TEMPORAL_ADDRESS": "temporal.example:7233"},
			check: func(t *testing.T, c *Config) {
				assert.Equal(t, "temporal.example:7233", c.Temporal.Address)
			},
		},
		{
			name: "key of a machine with a dash in its name",
			env:  map[string]string{"MESHROLL_MACHINES_EDGE_1_HOST": "http://10.0.0.9:7400"},
			check: func(t *testing.T, c *Config) {
				assert.Equal(t, "http://10.0.0.9:7400", c.Machines["edge-1"].Host)
				assert.Equal(t, "http://127.0.0.1:7400", c.Machines["control-node"].Host)
			},
		},
		{
			name: "duration of a section absent from the file",
			env:  map[string]string{"MESHROLL_PUSH_RETRY_BUDGET": "30s"},
			check: func(t *testing.T, c *Config) {
				assert.Equal(t, Push{RunningTimeout: 5 * time.Minute, RetryBudget: 30 * time.Second, RelayAbove: meshapi.RelayAbove, RehandAfter: meshapi.RehandAfter, HandWindow: meshapi.HandWindow}, c.Push)
				assert.Equal(t, 30*time.Second, c.PushPolicy().RetryBudget)
			},
		},
		{
			name: "boolean of a section absent from the file",
			env:  map[string]string{"MESHROLL_PUSH_LOCAL_ACTIVITY": "true"},
			check: func(t *testing.T, c *Config) {
				assert.True(t, c.Push.LocalActivity)
				assert.Equal(t, 5*time.Minute, c.Push.RunningTimeout)
			},
		},
		{
			name: "key absent from the file",
			env: map[string]string{
				"MESHROLL_MACHINES_EDGE_1_TOKEN": "s3cret",
				"MESHROLL_STATE_DIR":             "/var/lib/meshroll",
				"MESHROLL_TEMPORAL_TASK_QUEUE":   "other",
			},
			check: func(t *testing.T, c *Config) {
				assert.Equal(t, "s3cret", c.Machines["edge-1"].Token.Reveal())
				assert.Equal(t, "/var/lib/meshroll", c.StateDir)
				assert.Equal(t, "other", c.Temporal.TaskQueue)
				assert.Equal(t, "default", c.Temporal.Namespace)
			},
		},
		{
			name: "tier and list",
			env: map[string]string{
				"MESHROLL_MACHINES_EDGE_1_TIER":          "0",
				"MESHROLL_MACHINES_CONTROL_NODE_MODULES": "host, mesh-controller",
			},
			check: func(t *testing.T, c *Config) {
				got, err := c.Targets("host")
				require.NoError(t, err)
				assert.Equal(t, []meshapi.Target{
					{Machine: "edge-1", Tier: 0, Modules: []string{"host"}},
					{Machine: "control-node", Tier: 2, Modules: []string{"host", "mesh-controller"}, Alone: true},
				}, got)
			},
		},
		{
			name: "env entry keeps its case",
			env:  map[string]string{"MESHROLL_MODULES_HOST_ENV_LOG_LEVEL": "debug"},
			check: func(t *testing.T, c *Config) {
				assert.Equal(t, map[string]string{"LOG_LEVEL": "debug", "Keep": "this"}, c.Modules["host"].Env)
			},
		},
		{
			name: "empty variable is ignored",
			env:  map[string]string{"MESHROLL_TEMPORAL_ADDRESS": ""},
			check: func(t *testing.T, c *Config) {
				assert.Equal(t, "127.0.0.1:7233", c.Temporal.Address)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Load(writeConfig(t, src))
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestEnvOverrideProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []Problem
	}{
		{
			name: "tier",
			env:  map[string]string{"MESHROLL_MACHINES_EDGE_1_TIER": "two"},
			want: []Problem{{"machines.edge-1.tier", `must be a non-negative integer, got "two" (from MESHROLL_MACHINES_EDGE_1_TIER)`}},
		},
		{
			name: "negative tier",
			env:  map[string]string{"MESHROLL_MACHINES_EDGE_1_TIER": "-1"},
			want: []Problem{{"machines.edge-1.tier", `must be a non-negative integer, got -1 (from MESHROLL_MACHINES_EDGE_1_TIER)`}},
		},
		{
			name: "duration",
			env:  map[string]string{"MESHROLL_PUSH_RETRY_BUDGET": "-5s", "MESHROLL_PUSH_RUNNING_TIMEOUT": "soon"},
			want: []Problem{
				{"push.retry_budget", "must be a positive duration such as 90s or 5m, got -5s (from MESHROLL_PUSH_RETRY_BUDGET)"},
				{"push.running_timeout", `must be a duration such as 90s or 5m, got "soon" (from MESHROLL_PUSH_RUNNING_TIMEOUT)`},
			},
		},
		{
			name: "boolean",
			env:  map[string]string{"MESHROLL_PUSH_LOCAL_ACTIVITY": "local"},
			want: []Problem{{"push.local_activity", `must be true or false, got "local" (from MESHROLL_PUSH_LOCAL_ACTIVITY)`}},
		},
		{
			name: "host",
			env:  map[string]string{"MESHROLL_MACHINES_CONTROL_NODE_HOST": "10.0.0.1:7400"},
			want: []Problem{{"machines.control-node.host", `"10.0.0.1:7400" has no scheme; want the host API's base URL, such as http://10.0.0.1:7400 (from MESHROLL_MACHINES_CONTROL_NODE_HOST)`}},
		},
		{
			name: "section shadowed",
			env:  map[string]string{"MESHROLL_MACHINES_EDGE_1": "x"},
			want: []Problem{{"machines.edge-1", "MESHROLL_MACHINES_EDGE_1 is set, which hides everything under machines.edge-1 from viper; unset it and override single keys (MESHROLL_MACHINES_EDGE_1_<KEY>) (line 6)"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			assert.Equal(t, tc.want, problemsOf(t, valid))
		})
	}
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []Problem
	}{
		{
			name: "valid",
			src:  valid,
		},
		{
			name: "machine names an unknown module",
			src: `modules:
  host: {repo: .}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host, hots]}
`,
			want: []Problem{{"machines.edge-1.modules", `unknown module "hots"; modules are host (line 4)`}},
		},
		{
			name: "machine lists a module twice",
			src: `modules:
  host: {repo: .}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host, host]}
`,
			want: []Problem{{"machines.edge-1.modules", `lists "host" twice (line 4)`}},
		},
		{
			name: "module no machine runs",
			src: `modules:
  host: {repo: .}
  spare: {repo: .}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host]}
`,
			want: []Problem{{"modules.spare", "no machine runs it; add it to a machine's modules or remove it (line 3)"}},
		},
		{
			name: "negative tier",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: -1, modules: [host]}
`,
			want: []Problem{{"machines.edge-1.tier", "must be a non-negative integer, got -1 (line 3)"}},
		},
		{
			name: "word tier",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: two, modules: [host]}
`,
			want: []Problem{{"machines.edge-1.tier", `must be a non-negative integer, got "two" (line 3)`}},
		},
		{
			name: "fractional tier",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: 1.5, modules: [host]}
`,
			want: []Problem{{"machines.edge-1.tier", "must be a non-negative integer, got 1.5 (line 3)"}},
		},
		{
			name: "list tier",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: [1], modules: [host]}
`,
			want: []Problem{{"machines.edge-1.tier", "must be a non-negative integer, got a list (line 3)"}},
		},
		{
			name: "missing tier",
			src: `modules: {host: {repo: .}}
machines:
  edge-1:
    host: http://h:1
    modules: [host]
`,
			want: []Problem{{"machines.edge-1.tier", "missing; give the machine a tier, a non-negative integer (tier 0 is pushed first), or labels that a tiers.<n>.select matches (line 3)"}},
		},
		{
			name: "quoted tier is accepted",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: "0", modules: [host]}
`,
		},
		{
			name: "bad hosts",
			src: `modules: {host: {repo: .}}
machines:
  a: {host: 10.0.0.1:7400, tier: 1, modules: [host]}
  b: {host: "http://", tier: 1, modules: [host]}
  c: {host: ftp://h:1, tier: 1, modules: [host]}
  d: {host: "http://%zz", tier: 1, modules: [host]}
  e: {host: "http://admin:hunter2@h:1", tier: 1, modules: [host]}
  f: {tier: 1, modules: [host]}
  g: {host: {url: x}, tier: 1, modules: [host]}
`,
			want: []Problem{
				{"machines.a.host", `"10.0.0.1:7400" has no scheme; want the host API's base URL, such as http://10.0.0.1:7400 (line 3)`},
				{"machines.b.host", `"http:" has no host; want the host API's base URL, such as http://10.0.0.5:7400 (line 4)`},
				{"machines.c.host", `"ftp://h:1" is not an http or https URL; want the host API's base URL, such as http://10.0.0.5:7400 (line 5)`},
				{"machines.d.host", "does not parse as a URL; want the host API's base URL, such as http://10.0.0.5:7400 (line 6)"},
				{"machines.e.host", `"http://admin:xxxxx@h:1" carries credentials; put the token in token (MESHROLL_MACHINES_<NAME>_TOKEN) instead (line 7)`},
				{"machines.f.host", "missing; want the host API's base URL, such as http://10.0.0.5:7400 (line 8)"},
				{"machines.g.host", "must be a string, got a mapping (line 9)"},
			},
		},
		{
			name: "duplicate module",
			src: `modules:
  host: {repo: .}
  host: {repo: ./other}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host]}
`,
			want: []Problem{{"modules.host", "duplicate key: defined at line 2 and again at line 3; only one may stay"}},
		},
		{
			name: "duplicate machine and duplicate field",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host]}
  edge-1: {host: http://h:2, tier: 1, modules: [host]}
  edge-2: {host: http://h:3, tier: 1, tier: 2, modules: [host]}
`,
			want: []Problem{
				{"machines.edge-1", "duplicate key: defined at line 3 and again at line 4; only one may stay"},
				{"machines.edge-2.tier", "duplicate key: defined at line 5 and again at line 5; only one may stay"},
			},
		},
		{
			name: "names that collide in viper or the environment",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host]}
  Edge-1: {host: http://h:2, tier: 1, modules: [host]}
  edge_1: {host: http://h:3, tier: 1, modules: [host]}
`,
			want: []Problem{
				{"machines.Edge-1", `collides with edge-1: viper lowercases keys, so the two would be read as one (line 4)`},
				{"machines.Edge-1", `machine name "Edge-1" must be 1-64 of [a-z0-9._-], starting and ending with a letter or digit (line 4)`},
				{"machines.edge_1", `collides with edge-1: both are overridden by the same MESHROLL_MACHINES_EDGE_1_* variables; rename one (line 5)`},
			},
		},
		{
			name: "invalid names",
			src: `modules: {"web/host": {repo: .}}
machines:
  "-edge": {host: http://h:1, tier: 1, modules: [web/host]}
`,
			want: []Problem{
				{"machines.-edge", `machine name "-edge" must be 1-64 of [a-z0-9._-], starting and ending with a letter or digit (line 3)`},
				{"modules.web/host", `module name "web/host" must be 1-64 of [a-z0-9._-], starting and ending with a letter or digit (line 1)`},
			},
		},
		{
			name: "nothing at all",
			src:  "",
			want: []Problem{
				{"machines", "no machines; declare at least one machine to push to"},
				{"modules", "no modules; declare at least one module to build and push"},
			},
		},
		{
			name: "empty sections",
			src:  "modules: {}\nmachines:\n",
			want: []Problem{
				{"machines", "no machines; declare at least one machine to push to (line 2)"},
				{"modules", "no modules; declare at least one module to build and push (line 1)"},
			},
		},
		{
			name: "machine with no modules",
			src: `modules: {host: {repo: .}}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host]}
  idle: {host: http://h:2, tier: 1, modules: []}
  idler: {host: http://h:3, tier: 1}
`,
			want: []Problem{
				{"machines.idle.modules", "runs no modules; list the modules it runs, such as [host] (line 4)"},
				{"machines.idler.modules", "runs no modules; list the modules it runs, such as [host] (line 5)"},
			},
		},
		{
			name: "module with no repo",
			src: `modules:
  host: {path: examples/host}
  bare:
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host, bare]}
`,
			want: []Problem{
				{"modules.bare.repo", `missing; name the git repository to build from ("." for this one) (line 3)`},
				{"modules.host.repo", `missing; name the git repository to build from ("." for this one) (line 2)`},
			},
		},
		{
			name: "empty temporal settings",
			src:  "temporal: {address: \"\", namespace: \"\", task_queue: \"\"}\nstate_dir: \"\"\n" + valid,
			want: []Problem{
				{"state_dir", "must not be empty (leave it out for the default, .meshroll) (line 2)"},
				{"temporal.address", "must not be empty (leave it out for the default, 127.0.0.1:7233) (line 1)"},
				{"temporal.namespace", "must not be empty (leave it out for the default, default) (line 1)"},
				{"temporal.task_queue", "must not be empty (leave it out for the default, meshroll) (line 1)"},
			},
		},
		{
			name: "control plane below another machine",
			src: `modules:
  mesh-controller: {repo: ., path: examples/controller, control_plane: true}
  host: {repo: ., path: examples/host}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 1, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7401, tier: 2, modules: [host]}
  edge-2: {host: http://127.0.0.1:7402, tier: 0, modules: [host]}
`,
			want: []Problem{{"machines.control-node.tier", "runs the control plane (mesh-controller) so must be in a tier above every other machine; edge-1 is in tier 2 (line 5)"}},
		},
		{
			name: "control plane sharing a tier",
			src: `modules:
  mesh-controller: {repo: ., control_plane: true}
  host: {repo: .}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 1, modules: [host, mesh-controller]}
  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}
`,
			want: []Problem{{"machines.control-node.tier", "runs the control plane (mesh-controller) so must be in a tier above every other machine; edge-1 is in tier 1 (line 5)"}},
		},
		{
			name: "several control planes in one tier",
			src: `modules:
  mesh-controller: {repo: ., control_plane: true}
  host: {repo: .}
machines:
  cp-1: {host: http://127.0.0.1:7400, tier: 3, modules: [mesh-controller]}
  cp-2: {host: http://127.0.0.1:7401, tier: 3, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7402, tier: 1, modules: [host]}
`,
		},
		{
			name: "unknown keys",
			src: `modlues: {}
temporal: {adress: x}
push: {timeout: 1m}
modules:
  host: {repo: ., control-plane: true}
machines:
  edge-1: {host: http://h:1, tiers: 1, modules: [host]}
`,
			want: []Problem{
				{"machines.edge-1.tier", "missing; give the machine a tier, a non-negative integer (tier 0 is pushed first), or labels that a tiers.<n>.select matches (line 7)"},
				{"machines.edge-1.tiers", "unknown key; known keys: host, tier, labels, modules, token, ca_file, env (line 7)"},
				{"modlues", "unknown key; known keys: temporal, state_dir, push, catalogue, registry, modules, machines, tiers, worker, analysis, windows, notify, enroll (line 1)"},
				{"modules.host.control-plane", "unknown key; known keys: repo, path, source, control_plane, main, builder, branch, command, digest_file, args, env, network, volumes, memory, cpus, user, stop_grace, health (line 5)"},
				{"push.timeout", "unknown key; known keys: running_timeout, retry_budget, local_activity, relay_above, rehand_after, hand_window, max_unavailable (line 3)"},
				{"temporal.adress", "unknown key; known keys: address, namespace, task_queue, tls, api_key, grpc_compression, ui_url (line 2)"},
			},
		},
		{
			name: "push durations",
			src:  "push: {running_timeout: 0s, retry_budget: -1m, rehand_after: -1s, hand_window: -5}\n" + valid,
			want: []Problem{
				{"push.hand_window", "must be a number of pushes, 1 or more (leave it out for the default, 1000), got -5 (line 1)"},
				{"push.rehand_after", "must be a positive duration such as 90s or 5m (leave it out for the default, 10m0s), got -1s (line 1)"},
				{"push.retry_budget", "must be a positive duration such as 90s or 5m, got -1m0s (line 1)"},
				{"push.running_timeout", "must be a positive duration such as 90s or 5m, got 0s (line 1)"},
			},
		},
		{
			name: "push durations without units",
			src:  "push:\n  running_timeout: 300\n  retry_budget: soon\n" + valid,
			want: []Problem{
				{"push.retry_budget", `must be a duration such as 90s or 5m, got "soon" (line 3)`},
				{"push.running_timeout", "must be a duration such as 90s or 5m, got 300 (line 2)"},
			},
		},
		{
			name: "values of the wrong shape",
			src: `temporal: 127.0.0.1:7233
modules:
  host: {repo: ., control_plane: yes, args: --verbose, env: [A=1]}
  other: just-a-string
machines:
  edge-1: {host: http://h:1, tier: 1, modules: host}
  edge-2: {host: http://h:2, tier: 1, modules: [host, other]}
`,
			want: []Problem{
				{"machines.edge-1.modules", `must be a list, such as [a, b], got "host" (line 6)`},
				{"modules.host.args", `must be a list, such as [a, b], got "--verbose" (line 3)`},
				{"modules.host.control_plane", `must be true or false, got "yes" (line 3)`},
				{"modules.host.env", "must be a mapping of variable name to value, got a list (line 3)"},
				{"modules.other", `must be a mapping of repo, path, source, control_plane, main, builder, branch, command, digest_file, args, env, network, volumes, memory, cpus, user, stop_grace, health, got "just-a-string" (line 4)`},
				{"temporal", `must be a mapping of address, namespace, task_queue, tls, api_key, grpc_compression, ui_url, got "127.0.0.1:7233" (line 1)`},
			},
		},
		{
			name: "sections of the wrong shape",
			src:  "modules: [host]\nmachines: edge-1\n",
			want: []Problem{
				{"machines", `must be a mapping of machine name to machine, got "edge-1" (line 2)`},
				{"modules", "must be a mapping of module name to module, got a list (line 1)"},
			},
		},
		{
			name: "env names",
			src: `modules:
  host: {repo: ., env: {LOG: a, log: b, 1BAD: c}}
machines:
  edge-1: {host: http://h:1, tier: 1, modules: [host]}
`,
			want: []Problem{
				{"modules.host.env.1BAD", `"1BAD" is not an environment variable name (letters, digits and _, not starting with a digit) (line 2)`},
				{"modules.host.env.log", "collides with LOG: viper lowercases keys, so the two would be read as one (line 2)"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, tc.src)
			assert.Equal(t, tc.want, got, "problems of:\n%s", tc.src)
		})
	}
}

// TestManyProblemsAtOnce checks that one bad file yields every problem, one
// line each, sorted by key.
func TestManyProblemsAtOnce(t *testing.T) {
	src := `temporal: {address: ""}
push: {retry_budget: 0s}
modules:
  mesh-controller: {repo: ., control_plane: true}
  host: {path: examples/host}
  unused: {repo: .}
  host: {repo: .}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 1, modules: [mesh-controller, host]}
  edge-1: {host: "localhost:7401", tiers: 2, modules: [host, hots]}
  edge-2: {host: http://127.0.0.1:7402, tier: 1.5, modules: [host]}
  edge-3: {host: http://127.0.0.1:7403, tier: 2, modules: []}
`
	_, err := Load(writeConfig(t, src))
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	path := ve.Path
	want := "mesh config " + path + ": 12 problems:\n" +
		`  machines.control-node.tier: runs the control plane (mesh-controller) so must be in a tier above every other machine; edge-3 is in tier 2 (line 9)
  machines.edge-1.host: "localhost:7401" has no scheme; want the host API's base URL, such as http://localhost:7401 (line 10)
  machines.edge-1.modules: unknown module "hots"; modules are host, mesh-controller, unused (line 10)
  machines.edge-1.tier: missing; give the machine a tier, a non-negative integer (tier 0 is pushed first), or labels that a tiers.<n>.select matches (line 10)
  machines.edge-1.tiers: unknown key; known keys: host, tier, labels, modules, token, ca_file, env (line 10)
  machines.edge-2.tier: must be a non-negative integer, got 1.5 (line 11)
  machines.edge-3.modules: runs no modules; list the modules it runs, such as [host] (line 12)
  modules.host: duplicate key: defined at line 5 and again at line 7; only one may stay
  modules.host.repo: missing; name the git repository to build from ("." for this one) (line 5)
  modules.unused: no machine runs it; add it to a machine's modules or remove it (line 6)
  push.retry_budget: must be a positive duration such as 90s or 5m, got 0s (line 2)
  temporal.address: must not be empty (leave it out for the default, 127.0.0.1:7233) (line 1)`
	assert.Equal(t, want, err.Error())
}

func TestValidateBuiltInCode(t *testing.T) {
	base := func() *Config {
		c := Default()
		c.Modules["mesh-controller"] = Module{Repo: ".", ControlPlane: true}
		c.Modules["host"] = Module{Repo: "."}
		c.Machines["control-node"] = Machine{Host: "http://127.0.0.1:7400", Tier: 2, Modules: []string{"mesh-controller", "host"}}
		c.Machines["edge-1"] = Machine{Host: "http://127.0.0.1:7401", Tier: 1, Modules: []string{"host"}}
		return c
	}
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"valid", func(*Config) {}, ""},
		{"negative tier", func(c *Config) {
			m := c.Machines["edge-1"]
			m.Tier = -1
			c.Machines["edge-1"] = m
		}, "mesh config: 1 problem:\n  machines.edge-1.tier: must be a non-negative integer, got -1"},
		{"control plane placement", func(c *Config) {
			m := c.Machines["edge-1"]
			m.Tier = 5
			c.Machines["edge-1"] = m
		}, "mesh config: 1 problem:\n  machines.control-node.tier: runs the control plane (mesh-controller) so must be in a tier above every other machine; edge-1 is in tier 5"},
		{"zero durations and uppercase name", func(c *Config) {
			c.Push = Push{}
			c.Modules["Host"] = Module{Repo: "."}
			m := c.Machines["edge-1"]
			m.Modules = append(m.Modules, "Host")
			c.Machines["edge-1"] = m
		}, "mesh config: 3 problems:\n" +
			"  modules.Host: module name \"Host\" must be 1-64 of [a-z0-9._-], starting and ending with a letter or digit\n" +
			"  push.retry_budget: must be a positive duration such as 90s or 5m, got 0s\n" +
			"  push.running_timeout: must be a positive duration such as 90s or 5m, got 0s"},
		{"empty", func(c *Config) { *c = Config{} }, "mesh config: 8 problems:\n" +
			"  machines: no machines; declare at least one machine to push to\n" +
			"  modules: no modules; declare at least one module to build and push\n" +
			"  push.retry_budget: must be a positive duration such as 90s or 5m, got 0s\n" +
			"  push.running_timeout: must be a positive duration such as 90s or 5m, got 0s\n" +
			"  state_dir: must not be empty (leave it out for the default, .meshroll)\n" +
			"  temporal.address: must not be empty (leave it out for the default, 127.0.0.1:7233)\n" +
			"  temporal.namespace: must not be empty (leave it out for the default, default)\n" +
			"  temporal.task_queue: must not be empty (leave it out for the default, meshroll)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(c)
			err := c.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.want)
		})
	}
}

func TestTokenNeverPrinted(t *testing.T) {
	const token = "hunter2-token"
	t.Setenv("MESHROLL_MACHINES_EDGE_1_TOKEN", token)
	c, err := Load("testdata/mesh.yaml")
	require.NoError(t, err)
	require.Equal(t, token, c.Machines["edge-1"].Token.Reveal(), "the token is there to be used")

	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("machine", "machine", c.Machines["edge-1"])
	js, err := json.Marshal(c)
	require.NoError(t, err)
	for _, s := range []string{
		fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c),
		fmt.Sprint(c.Machines["edge-1"]), fmt.Sprintf("%#v", c.Machines["edge-1"]),
		buf.String(), string(js),
	} {
		assert.NotContains(t, s, token)
	}
	assert.Contains(t, fmt.Sprint(c.Machines["edge-1"]), secret.Redacted)
	assert.True(t, strings.Contains(buf.String(), secret.Redacted), "slog output: %s", buf.String())
}

// The image source depends on the module's config alone, never on a clone.
func TestImageSource(t *testing.T) {
	for _, tt := range []struct{ name, repo, source, want string }{
		{"source given", ".", "https://git.example.com/org/mesh", "https://git.example.com/org/mesh"},
		{"source wins over a URL repo", "https://git.example.com/org/mesh.git", "https://example.com/mesh", "https://example.com/mesh"},
		{"URL repo", "https://git.example.com/org/mesh.git", "", "https://git.example.com/org/mesh.git"},
		{"URL repo loses its credentials", "https://bot:s3cret@git.example.com/org/mesh.git", "", "https://git.example.com/org/mesh.git"},
		{"local repo: none", ".", "", ""},
		{"local path: none", "/srv/mesh", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Module{Repo: tt.repo, Source: tt.source}.ImageSource())
		})
	}
}

func TestBuilderAndRegistry(t *testing.T) {
	base := `modules:
  host: {repo: ., path: examples/host%s}
machines:
  edge-1: {host: "http://127.0.0.1:7401", tier: 1, modules: [host]}
`
	tests := []struct {
		name, module, extra string
		want                []Problem
	}{
		{"go builder by default", "", "", nil},
		{"command builder with its command", ", builder: command, command: [ko, build]", "", nil},
		{"command builder without a command", ", builder: command", "", []Problem{{Key: "modules.host.command",
			Message: "missing; the command builder needs the command that pushes the image, such as [ko, build, --push]"}}},
		{"unknown builder", ", builder: bazel", "", []Problem{{Key: "modules.host.builder",
			Message: `unknown builder "bazel"; want go or command`}}},
		{"host network", ", network: host", "", nil},
		{"bridge network", ", network: bridge", "", nil},
		{"unknown network", ", network: overlay", "", []Problem{{Key: "modules.host.network",
			Message: `unknown network "overlay"; want host (the machine's own) or bridge (an address on the engine's bridge)`}}},
		{"source URL", ", source: \"https://git.example.com/org/mesh\"", "", nil},
		{"source not a URL", ", source: git.example.com/org/mesh", "", []Problem{{Key: "modules.host.source",
			Message: `"git.example.com/org/mesh" is not a URL without credentials`}}},
		{"source with credentials", ", source: \"https://u:p@git.example.com/org/mesh\"", "", []Problem{{Key: "modules.host.source",
			Message: "is not a URL without credentials"}}},
		{"token and password", "", "registry: {address: reg.example:5000, username: u, password: p, token: t}\n", []Problem{{Key: "registry.token",
			Message: "give either a token or a username and password, not both"}}},
		{"embedded registry beyond loopback", "", "registry: {listen: \"0.0.0.0:5000\"}\n", []Problem{{Key: "registry.listen",
			Message: "0.0.0.0:5000 reaches beyond loopback, and the embedded registry asks no credentials"}}},
		{"embedded registry beyond loopback with credentials", "",
			"registry: {listen: \"0.0.0.0:5000\", username: worker, password: p, pull_username: hosts, pull_password: q}\n", nil},
		{"embedded registry on loopback", "", "registry: {listen: \"127.0.0.1:5000\"}\n", nil},
		{"pull credential without a password", "", "registry: {username: worker, password: p, pull_username: hosts}\n",
			[]Problem{{Key: "registry.pull_username", Message: "pull_username and pull_password go together"}}},
		{"pull credential alone", "", "registry: {pull_username: hosts, pull_password: q}\n",
			[]Problem{{Key: "registry.pull_username", Message: "a pull credential needs the worker's too"}}},
		{"deletes at an external registry", "", "registry: {address: reg.example:5000, deletes: true}\n",
			[]Problem{{Key: "registry.address", Message: "are the embedded registry's"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.extra + fmt.Sprintf(base, tt.module)
			_, err := Parse("mesh.yaml", []byte(src))
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Len(t, ve.Problems, len(tt.want))
			for i, p := range tt.want {
				require.Equal(t, p.Key, ve.Problems[i].Key)
				require.Contains(t, ve.Problems[i].Message, p.Message)
			}
		})
	}
	c, err := Parse("mesh.yaml", []byte("registry: {address: reg.example:5000, username: u, password: s3cret}\n"+fmt.Sprintf(base, "")))
	require.NoError(t, err)
	require.Equal(t, DefaultRegistryRepository, c.Registry.Repository)
	require.NotContains(t, fmt.Sprint(c.Registry), "s3cret")
	b, _ := json.Marshal(c.Registry)
	require.NotContains(t, string(b), "s3cret")
}

func TestWarnings(t *testing.T) {
	cases := []struct {
		name, host, token string
		want              string // substring of the one warning, or "" for none
	}{
		{"edge-1", "http://10.0.0.5:7400", "t0k", "its host token is sent in clear to 10.0.0.5:7400"},
		{"edge-1", "http://10.0.0.5:7400", "", "set MESHROLL_MACHINES_EDGE_1_TOKEN"},
		{"edge-1", "https://10.0.0.5:7400", "t0k", ""},
		{"edge-1", "http://127.0.0.1:7400", "", ""},
		{"edge-1", "http://localhost:7400", "t0k", ""},
		{"edge-1", "http://[::1]:7400", "t0k", ""},
	}
	for _, c := range cases {
		t.Run(c.host+"/"+c.token, func(t *testing.T) {
			cfg := &Config{Machines: map[string]Machine{c.name: {Host: c.host, Token: secret.String(c.token)}}}
			got := cfg.Warnings()
			switch {
			case c.want == "" && len(got) != 0:
				t.Errorf("Warnings() = %q, want none", got)
			case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
				t.Errorf("Warnings() = %q, want one containing %q", got, c.want)
			case len(got) == 1 && strings.Contains(got[0], c.token) && c.token != "":
				t.Errorf("a warning shows the token: %q", got[0])
			}
		})
	}
}

func TestWarningsMergeReceiverBeyondLoopback(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:8235", ""},
		{"0.0.0.0:8235", "worker.webhook_listen 0.0.0.0:8235: the merge receiver is plain http, so GitLab's token travels in clear beyond loopback"},
	} {
		got := (&Config{Worker: Worker{WebhookListen: tc.listen, WebhookSecret: "s3cret"}}).Warnings()
		if tc.want == "" {
			assert.Empty(t, got, tc.listen)
			continue
		}
		require.Len(t, got, 1)
		assert.Contains(t, got[0], tc.want)
		assert.NotContains(t, got[0], "s3cret")
	}
}

func TestWarningsFleetPageBeyondLoopback(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:8234", ""},
		{"localhost:8234", ""},
		{":8234", "worker.ui_listen :8234: the fleet page is plain http, so its token travels in clear beyond loopback"},
		{"10.0.0.5:8234", "worker.ui_listen 10.0.0.5:8234: the fleet page is plain http"},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			got := (&Config{Worker: Worker{UIListen: tc.listen, UIToken: "s3cret"}}).Warnings()
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Contains(t, got[0], tc.want)
			assert.NotContains(t, got[0], "s3cret")
		})
	}
}

func TestWarningsSecretModuleEnv(t *testing.T) {
	cfg := &Config{Modules: map[string]Module{
		"api": {Env: map[string]string{"LOG_LEVEL": "debug", "db_password": "hunter2"}},
		"web": {Env: map[string]string{"PORT": "8080"}},
	}}
	got := cfg.Warnings()
	if len(got) != 1 || !strings.Contains(got[0], "module api: env db_password looks like a secret") || strings.Contains(got[0], "hunter2") {
		t.Errorf("Warnings() = %q, want one about api's db_password, without its value", got)
	}
}

// gzip costs CPU and saves nothing on loopback: auto turns it off there and
// only there; an explicit value wins; anything else is refused.
func TestGrpcCompression(t *testing.T) {
	for _, tt := range []struct{ address, setting, want string }{
		{"127.0.0.1:7233", "", CompressionNone},
		{"[::1]:7233", "auto", CompressionNone},
		{"localhost:7233", "", CompressionNone},
		{"10.0.0.5:7233", "", CompressionGzip},
		{"temporal.example.com:7233", "auto", CompressionGzip},
		{"127.0.0.1:7233", "gzip", CompressionGzip},
		{"ns.tmprl.cloud:7233", "none", CompressionNone},
	} {
		t.Run(tt.address+" "+tt.setting, func(t *testing.T) {
			require.Equal(t, tt.want, Temporal{Address: tt.address, GrpcCompression: tt.setting}.Compression())
		})
	}
	_, err := Parse("mesh.yaml", []byte("temporal: {grpc_compression: zstd}\nmodules:\n  host: {repo: ., path: examples/host}\nmachines:\n  edge-1: {host: \"http://127.0.0.1:7401\", tier: 1, modules: [host]}\n"))
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "temporal.grpc_compression", ve.Problems[0].Key)
	require.Contains(t, ve.Problems[0].Message, `unknown compression "zstd"; want auto, none or gzip`)
}
