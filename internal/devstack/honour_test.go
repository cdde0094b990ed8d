package devstack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

// `worker --dev --runtime docker` with no engine at its socket says so,
// naming the socket and the flag, before anything starts.
func TestRunDockerWithNoEngine(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	fakeCLI(t, "touch "+marker+"; exit 3")
	p := freePorts(t)
	socket := filepath.Join(t.TempDir(), "none.sock")
	var out bytes.Buffer
	err := Run(context.Background(), Options{ConfigPath: writeMesh(t, p), StateDir: t.TempDir(), UIPort: p.ui,
		Runtime: agent.RuntimeDocker, DockerSocket: socket, Out: &out})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--runtime docker: runtime docker: no engine answers")
	assert.Contains(t, err.Error(), socket)
	assert.Contains(t, err.Error(), "--docker-socket names another socket")
	assert.NoFileExists(t, marker, "the dev server was never started")
	assert.NotContains(t, out.String(), "ready")
}

// On docker the dev stack's Ctrl-C stops its agents cleanly, which leave
// their containers running; it says so, and how to remove them from the
// engine it used. Needs the test engine (scripts/docker-test.sh).
func TestRunOnDockerSaysItsContainersStay(t *testing.T) {
	socket := os.Getenv("MESHROLL_TEST_DOCKER_SOCKET")
	if socket == "" {
		t.Skip(`no Docker engine: export MESHROLL_TEST_DOCKER_SOCKET="$(bash scripts/docker-test.sh)"`)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, out, _, res := runUntilReady(t, ctx, func(o *Options) { o.Runtime, o.DockerSocket = agent.RuntimeDocker, socket })
	assert.Contains(t, out.String(), "(tier 1, runtime docker)")
	stopRun(t, cancel, res)
	assert.Contains(t, out.String(), "docker     the machines' containers keep running; the next start adopts them. To remove them:\n")
	assert.Contains(t, out.String(), "docker -H unix://"+socket+" rm -f $(docker -H unix://"+socket+" ps -aq --filter label=io.meshroll.machine)")
}
