package meshfile_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshfile"
)

// A written file is one the config loader takes, with every key where the
// File put it.
func TestWrittenFileLoads(t *testing.T) {
	f := meshfile.File{
		Address: "127.0.0.1:7233", TaskQueue: "q", Compression: "gzip", StateDir: "/tmp/state",
		Registry: "http://127.0.0.1:5000",
		Push:     "{local_activity: true}",
		Tiers:    "{1: {max_parallel: 1, bake: 5s, analysis: [error-rate]}}",
		Analysis: `
			providers:
				prom: {prometheus: {address: "http://127.0.0.1:9090"}}
			checks:
				error-rate: {provider: prom, query: 'sum(up)', success: 'result < 0.05', interval: 1s, count: 3}`,
		Modules: []meshfile.Module{
			{Name: "api", Repo: ".", Health: "{min_healthy: 0s}", Network: "host"},
			{Name: "ctl", Repo: "/srv/repo", Path: "cmd/ctl", ControlPlane: true},
		},
		Machines: []meshfile.Machine{
			{Name: "edge-1", Host: "http://127.0.0.1:1", Tier: 1, Modules: []string{"api"}, Token: "tok-edge-1"},
			{Name: "core-1", Host: "http://127.0.0.1:2", Tier: 2, Modules: []string{"api", "ctl"}},
		},
	}
	cfg, err := config.Parse("mesh.yaml", []byte(f.String()))
	require.NoError(t, err, f.String())
	require.Equal(t, "default", cfg.Temporal.Namespace)
	require.Equal(t, "q", cfg.Temporal.TaskQueue)
	require.Equal(t, "examples/api", cfg.Modules["api"].Path)
	require.Equal(t, "cmd/ctl", cfg.Modules["ctl"].Path)
	require.True(t, cfg.Modules["ctl"].ControlPlane)
	require.False(t, cfg.Modules["api"].ControlPlane)
	require.Equal(t, "host", cfg.Modules["api"].Network)
	require.Empty(t, cfg.Modules["ctl"].Network)
	require.Equal(t, 2, cfg.Machines["core-1"].Tier)
	require.Equal(t, []string{"api", "ctl"}, cfg.Machines["core-1"].Modules)
	require.Equal(t, "http://127.0.0.1:1", cfg.Machines["edge-1"].Host)
	require.Equal(t, config.Amount{N: 1}, cfg.Tiers[1].MaxParallel)
	require.Equal(t, 3, cfg.Analysis.Checks["error-rate"].Count)
}

// Section takes a tab-indented raw string or a flow mapping alike.
func TestSection(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"flow", "{a: 1}", "  {a: 1}\n"},
		{"tabs", "\n\t\ta:\n\t\t\tb: 1\n\n\t\tc: 2\n", "  a:\n    b: 1\n  c: 2\n"},
		{"spaces", "  a:\n    b: 1\n", "  a:\n    b: 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, meshfile.Section(tc.in))
		})
	}
}
