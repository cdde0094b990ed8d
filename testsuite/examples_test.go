package testsuite

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
)

// The root mesh.yaml (what the starter reads by default) and
// examples/mesh.yaml (what the dev stack starts) must describe one mesh, or
// a merge from the starter would plan against machines the dev stack does
// not run.
func TestExampleMeshesAgree(t *testing.T) {
	t.Parallel()
	root, err := config.Load(filepath.Join("..", "mesh.yaml"))
	require.NoError(t, err)
	ex, err := config.Load(filepath.Join("..", "examples", "mesh.yaml"))
	require.NoError(t, err)
	require.Equal(t, ex.Temporal, root.Temporal)
	require.Equal(t, ex.Registry, root.Registry)
	require.Equal(t, ex.Push, root.Push)
	require.Equal(t, ex.Machines, root.Machines)
	require.Equal(t, ex.ModuleNames(), root.ModuleNames())
	for name, m := range ex.Modules {
		r := root.Modules[name]
		// Repos are relative to each file's directory: both name the
		// repository root.
		require.Equal(t, filepath.Clean(filepath.Join("examples", m.Repo)), filepath.Clean(r.Repo), "module %s repo", name)
		r.Repo, m.Repo = "", ""
		require.Equal(t, m, r, "module %s", name)
	}
}
