package devstack

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
)

// The dev stack chose every agent's runtime, so it says at start which
// module's settings a machine's runtime will refuse: on exec, a memory
// limit and a user, named with their machine and module; a module with no
// such settings, and a runtime that honours them all, say nothing.
func TestRunWarnsOfSettingsTheRuntimeCannotHonour(t *testing.T) {
	fakeCLI(t, `echo "fake server: cannot open database" >&2; exit 3`)
	p := freePorts(t)
	path := writeMesh(t, p)
	y, err := os.ReadFile(path)
	require.NoError(t, err)
	y = bytes.Replace(y, []byte("path: examples/host}"), []byte(`path: examples/host, memory: 64MiB, user: "1000:1000"}`), 1)
	require.NoError(t, os.WriteFile(path, y, 0o644))

	var out bytes.Buffer
	err = Run(context.Background(), Options{ConfigPath: path, StateDir: t.TempDir(), UIPort: p.ui, Out: &out})
	require.Error(t, err, "the fake dev server exits")
	var warnings []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "warning ") {
			warnings = append(warnings, l)
		}
	}
	require.Len(t, warnings, 2, "one line per machine running host:\n%s", out.String())
	for i, m := range []string{"edge-1", "control-node"} {
		w := warnings[i]
		assert.Contains(t, w, "machine "+m+": its exec runtime will refuse")
		assert.Contains(t, w, "module host: memory:")
		assert.Contains(t, w, "module host: user:")
		assert.NotContains(t, w, "module ctl", "ctl declares nothing exec cannot honour")
	}

	cfg := load(t, exampleYAML)
	noop, err := agent.NewRuntime(agent.RuntimeNoop, agent.RuntimeOptions{})
	require.NoError(t, err)
	assert.Empty(t, runtimeWarnings(cfg, map[string]agent.Runtime{"edge-1": noop}), "a runtime that checks nothing warns of nothing")
}
