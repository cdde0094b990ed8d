package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

// settingsMesh is a valid mesh whose module web's keys are on line 3 and
// whose machine edge-1's on line 5, formatted with more keys for each.
const settingsMesh = `modules:
  web:
    {repo: ., path: web%s}
machines:
  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [web]%s}
`

// Every container setting reads into the declaration's form.
func TestContainerSettingsKeys(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
		want       mesh.Settings
	}{
		{"none", "", mesh.Settings{}},
		{"a named volume and a directory read-only", `, volumes: ["data:/var/lib/web", "/etc/web:/etc/web:ro", "/srv/x:/x:rw"]`, mesh.Settings{Volumes: []mesh.Mount{
			{Source: "data", Target: "/var/lib/web"}, {Source: "/etc/web", Target: "/etc/web", ReadOnly: true}, {Source: "/srv/x", Target: "/x"},
		}}},
		{"memory in MiB", ", memory: 256MiB", mesh.Settings{MemoryBytes: 256 << 20}},
		{"memory in GiB", ", memory: 2GiB", mesh.Settings{MemoryBytes: 2 << 30}},
		{"memory in MB", ", memory: 500 MB", mesh.Settings{MemoryBytes: 500_000_000}},
		{"half a CPU", ", cpus: 0.5", mesh.Settings{NanoCPUs: 500_000_000}},
		{"two CPUs", ", cpus: 2", mesh.Settings{NanoCPUs: 2_000_000_000}},
		{"CPUs quoted, to the nano", `, cpus: "1.000000001"`, mesh.Settings{NanoCPUs: 1_000_000_001}},
		{"a uid and gid", `, user: "1000:1000"`, mesh.Settings{User: "1000:1000"}},
		{"a user name", ", user: app", mesh.Settings{User: "app"}},
		{"stop grace", ", stop_grace: 1m30s", mesh.Settings{StopGraceMS: 90_000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("mesh.yaml", []byte(fmt.Sprintf(settingsMesh, tc.keys, "")))
			require.NoError(t, err)
			got, err := c.Modules["web"].Settings()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A setting that does not read, or is out of bounds, is a problem naming
// its key and line, as every other key's.
func TestContainerSettingsProblems(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
		key, want  string
	}{
		{"a volume without target", `, volumes: [data]`, "modules.web.volumes", `item 1: "data" is not source:target or source:target:ro`},
		{"a volume with a relative target", `, volumes: ["data:var/lib"]`, "modules.web.volumes", `item 1: target "var/lib" is not an absolute path`},
		{"a volume without source", `, volumes: [":/data"]`, "modules.web.volumes", "item 1: source is empty"},
		{"a volume mounted on /", `, volumes: ["data:/"]`, "modules.web.volumes", `target "/" is not a clean absolute path`},
		{"a volume's unknown mode", `, volumes: ["data:/d:rx"]`, "modules.web.volumes", `"data:/d:rx" is not source:target`},
		{"two volumes on one target", `, volumes: ["data:/d", "/srv:/d"]`, "modules.web.volumes", `item 2: "/srv:/d" mounts /d, which "data:/d" mounts already`},
		{"volumes not a list", `, volumes: {a: b}`, "modules.web.volumes", "must be a list"},
		{"memory without a unit", ", memory: 256", "modules.web.memory", `"256" is not a size with a unit, such as 256MiB`},
		{"memory in docker's m", ", memory: 256m", "modules.web.memory", `unit "m"; want B, KiB, MiB`},
		{"memory with a fraction", ", memory: 1.5GiB", "modules.web.memory", "is not a size with a unit"},
		{"memory too small", ", memory: 1MiB", "modules.web.memory", "1MiB is below 6MiB"},
		{"memory overflowing", ", memory: 99999999999TiB", "modules.web.memory", "too large"},
		{"cpus a percentage", ", cpus: 50%", "modules.web.cpus", `"50%" is not a number of CPUs`},
		{"cpus negative", ", cpus: -1", "modules.web.cpus", `"-1" is not a number of CPUs`},
		{"cpus zero", ", cpus: 0", "modules.web.cpus", "0 is below 0.001 CPUs"},
		{"cpus too many", ", cpus: 5000", "modules.web.cpus", "more than 1024 CPUs"},
		{"cpus in exponent", ", cpus: 1e3", "modules.web.cpus", "is not a number of CPUs"},
		{"user with a space", `, user: "app user"`, "modules.web.user", `"app user" is not a user name or uid`},
		{"user with two colons", `, user: "1:2:3"`, "modules.web.user", `"1:2:3" is not a user name or uid`},
		{"stop grace without a unit", ", stop_grace: 10", "modules.web.stop_grace", "must be a duration"},
		{"stop grace negative", ", stop_grace: -1s", "modules.web.stop_grace", "0s or more"},
		{"stop grace over an hour", ", stop_grace: 2h", "modules.web.stop_grace", "longer than an hour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := problemsOf(t, fmt.Sprintf(settingsMesh, tc.keys, ""))
			require.Len(t, ps, 1, "%v", ps)
			assert.Equal(t, tc.key, ps[0].Key)
			assert.Contains(t, ps[0].Message, tc.want)
			assert.True(t, strings.HasSuffix(ps[0].Message, "(line 3)"), "names the line: %s", ps[0].Message)
		})
	}
}

// A machine's env is read as module env is: names keep their case, and a
// name that is no variable's is a problem naming key and line.
func TestMachineEnv(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(fmt.Sprintf(settingsMesh, "", ", env: {SITE: fra1, log_level: debug}")))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"SITE": "fra1", "log_level": "debug"}, c.Machines["edge-1"].Env)

	ps := problemsOf(t, fmt.Sprintf(settingsMesh, "", ", env: {1SITE: fra1}"))
	require.Len(t, ps, 1, "%v", ps)
	assert.Equal(t, "machines.edge-1.env.1SITE", ps[0].Key)
	assert.Contains(t, ps[0].Message, "is not an environment variable name")
	assert.Contains(t, ps[0].Message, "(line 5)")
}

// A machine env variable named like a secret is warned of, as a module's.
func TestWarningsSecretMachineEnv(t *testing.T) {
	cfg := &Config{Machines: map[string]Machine{
		"edge-1": {Host: "http://127.0.0.1:7400", Env: map[string]string{"SITE": "a", "API_TOKEN": "hunter2"}},
	}}
	got := cfg.Warnings()
	if len(got) != 1 || !strings.Contains(got[0], "machine edge-1: env API_TOKEN looks like a secret") || strings.Contains(got[0], "hunter2") {
		t.Errorf("Warnings() = %q, want one about edge-1's API_TOKEN, without its value", got)
	}
}
