package workerapp

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
)

// gitRepo makes a repository in dir with a committed directory per path.
func gitRepo(t *testing.T, dir string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, p), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p, "main.go"), []byte("package main\n"), 0o644))
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "modules"}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
			"GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
}

// A mistyped module path, or a repo that is not there, is refused when the
// worker starts: every such module named by its key and line, with what to
// do, and so is a repo given as a URL, which the worker cannot build from.
func TestCheckSources(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir()) // as git names it
	require.NoError(t, err)
	gitRepo(t, dir, "examples/host", "examples/metrics")
	path := filepath.Join(dir, "mesh.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`modules:
  host:    {repo: ., path: examples/host}
  metrics: {repo: ., path: examples/metrcs}
  ctl:     {repo: ../elsewhere, path: examples/controller, control_plane: true}
  remote:  {repo: "https://git.example.com/org/mesh", path: x}
machines:
  edge-1:       {host: "http://127.0.0.1:7401", tier: 1, modules: [host, metrics, remote]}
  control-node: {host: "http://127.0.0.1:7400", tier: 2, modules: [ctl]}
`), 0o644))
	cfg, err := config.Load(path)
	require.NoError(t, err, "the file itself is valid: only the sources are wrong")

	err = CheckSources(context.Background(), cfg, dir)
	var ve *config.ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	assert.Equal(t, path, ve.Path)
	require.Len(t, ve.Problems, 3, "%v", err)
	assert.Equal(t, "modules.ctl.repo", ve.Problems[0].Key)
	assert.Equal(t, "not a git repository: "+filepath.Join(dir, "../elsewhere")+` does not exist; name the git repository module ctl is built from, relative to the config file's directory ("." for the one beside it) (line 4)`,
		ve.Problems[0].Message)
	assert.Equal(t, "modules.metrics.path", ve.Problems[1].Key)
	assert.Equal(t, `"examples/metrcs" is not a directory in repository `+dir+" (looked in its working tree "+dir+" and its main line main); set it to module metrics's directory, relative to the repository's root (line 3)",
		ve.Problems[1].Message)
	assert.Equal(t, "modules.remote.repo", ve.Problems[2].Key)
	assert.Equal(t, `"https://git.example.com/org/mesh" is a URL, and the worker builds module remote from a git clone on its own disk: `+
		`clone it there and set repo to the clone's directory (source: "https://git.example.com/org/mesh" keeps the URL on the images) (line 5)`,
		ve.Problems[2].Message)
	assert.Contains(t, err.Error(), "mesh config "+path+": 3 problems:")

	// Fixed, it passes.
	delete(cfg.Modules, "ctl")
	delete(cfg.Modules, "remote")
	m := cfg.Modules["metrics"]
	m.Path = "examples/metrics"
	cfg.Modules["metrics"] = m
	require.NoError(t, CheckSources(context.Background(), cfg, dir))
}
