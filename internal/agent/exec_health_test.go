//go:build unix

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent/execrt/execrttest"
	"github.com/meshroll/meshroll/internal/mesh"
)

// The exec runtime's health tests run real processes (execrttest's app)
// judged by real probes; they wait on the report's long poll, never on a
// sleep.

// httpCheck probes GET /healthz on a port the agent picks.
func httpCheck(minHealthy time.Duration) mesh.Health {
	return mesh.Health{
		HTTP:       &mesh.HTTPProbe{Port: mesh.PortAuto, Path: "/healthz"},
		IntervalMS: 50, TimeoutMS: 2000, MinHealthyMS: minHealthy.Milliseconds(),
	}
}

// entries are the journal's entries with outcome, newest first.
func entries(es []Entry, outcome string) []Entry {
	var out []Entry
	for _, e := range es {
		if e.Outcome == outcome {
			out = append(out, e)
		}
	}
	return out
}

func TestExecProbes(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	probe := func(code string) []string { return []string{execrttest.AppPath, "probe", "v1", code} }
	cases := []struct {
		name   string
		cmd    []string // the image's
		check  mesh.Health
		health string
		status int
		exit   *int
		output string // in last_probe's output and, unhealthy, in the journal
	}{
		{"http 2xx", []string{"http", "v1", "200"}, httpCheck(0), mesh.HealthHealthy, 200, nil, "testapp v1 status 200"},
		{"http 500", []string{"http", "v1", "500"}, httpCheck(0), mesh.HealthUnhealthy, 500, nil, "testapp v1 status 500"},
		{"exec exit 0", []string{"serve", "v1"}, mesh.Health{Exec: probe("0"), IntervalMS: 50}, mesh.HealthHealthy, 0, ptr(0), "probe v1 module web exits 0"},
		{"exec exit 1", []string{"serve", "v1"}, mesh.Health{Exec: probe("1"), IntervalMS: 50}, mesh.HealthUnhealthy, 0, ptr(1), "probe v1 module web exits 1"},
		{"tcp", []string{"http", "v1", "200"}, mesh.Health{TCP: &mesh.TCPProbe{}, IntervalMS: 50}, mesh.HealthHealthy, 0, nil, ""},
		{"tcp, nothing listens", []string{"serve", "v1"}, mesh.Health{TCP: &mesh.TCPProbe{}, IntervalMS: 50}, mesh.HealthUnhealthy, 0, nil, "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, tc.cmd...))
			dir := t.TempDir()
			e := openExecAgent(t, dir, reg)
			web := checked(mesh.Container{Module: "web", Digest: p.Digest, Generation: 3, Image: p.Image}, tc.check)
			_, err := e.c.Apply(context.Background(), decl(1, web))
			require.NoError(t, err)

			rc := waitContainer(t, e.c, "web", "judged", func(rc mesh.RunningContainer) bool { return rc.Health != mesh.HealthUnknown })
			assert.Equal(t, tc.health, rc.Health)
			require.NotNil(t, rc.LastProbe)
			lp := rc.LastProbe
			assert.Equal(t, tc.health == mesh.HealthHealthy, lp.OK)
			assert.Equal(t, tc.status, lp.Status)
			assert.Equal(t, tc.exit, lp.ExitCode)
			assert.Contains(t, lp.Output, tc.output)
			assert.NotEmpty(t, lp.At)

			es := journalOf(t, e.a)
			f, raised := floorOf(e.a, "web")
			if tc.health == mesh.HealthHealthy {
				assert.Equal(t, lp.At, rc.HealthySince)
				require.True(t, raised, "min_healthy 0: the floor rises with the first passing probe")
				assert.Equal(t, int64(3), f.Generation)
				assert.Equal(t, []string{"floor-raised 1", "healthy 1", "running 1", "applied 1"}, outcomes(es))
			} else {
				assert.Empty(t, rc.HealthySince)
				assert.False(t, raised, "a container that failed its probe raises no floor")
				assert.Equal(t, []string{"unhealthy 1", "running 1", "applied 1"}, outcomes(es))
				assert.Contains(t, es[0].Message, tc.output, "the journal says why")
				assert.Equal(t, tc.check, *es[0].Containers[0].Health)
			}
			if autoPort(&tc.check) {
				port := es[len(es)-1].Ports["web"]
				require.NotZero(t, port, "the applied entry names the port picked")
				assert.Equal(t, map[string]int{"web": port}, es[0].Ports)
				logHas(t, dir, fmt.Sprintf("env %s=%d", mesh.EnvPort, port))
			}
		})
	}
}

func ptr(n int) *int { return &n }

// logHas waits until web's log (written by the process, which no update
// announces) holds s.
func logHas(t *testing.T, dir, s string) {
	t.Helper()
	execrttest.Eventually(t, waitLimit, fmt.Sprintf("web's log has %q", s), func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "logs", "web.log"))
		return strings.Contains(string(b), s)
	})
}

// TestExecExitBeforeMinHealthy: a process that serves for 2s and exits
// never counts healthy when min_healthy is 3s: each exit breaks it, its
// healthy_since starts again, and the floor never rises.
func TestExecExitBeforeMinHealthy(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "http-exit", "v1", "2s"))
	e := openExecAgent(t, t.TempDir(), reg)
	web := checked(mesh.Container{Module: "web", Digest: p.Digest, Generation: 3, Image: p.Image}, httpCheck(3*time.Second))
	_, err := e.c.Apply(context.Background(), decl(1, web))
	require.NoError(t, err)

	first := waitContainer(t, e.c, "web", "healthy", healthIs(mesh.HealthHealthy))
	broken := waitContainer(t, e.c, "web", "exited", func(rc mesh.RunningContainer) bool { return rc.Restarts >= 1 })
	assert.NotEqual(t, first.HealthySince, broken.HealthySince, "the exit broke it")
	second := waitContainer(t, e.c, "web", "healthy again", healthIs(mesh.HealthHealthy))
	assert.Greater(t, second.HealthySince, first.HealthySince)
	// Past the second exit, the first healthy run's min_healthy is long
	// over: had anything raised the floor, it would have by now.
	waitContainer(t, e.c, "web", "exited again", func(rc mesh.RunningContainer) bool { return rc.Restarts >= 2 })

	_, raised := floorOf(e.a, "web")
	assert.False(t, raised, "never healthy for min_healthy")
	es := journalOf(t, e.a)
	assert.Empty(t, entries(es, OutcomeFloorRaised))
	assert.Len(t, entries(es, OutcomeHealthy), 2)
	exits := entries(es, OutcomeExited)
	require.Len(t, exits, 2)
	// How long it ran is the runtime's reading, on a loaded box anything
	// around the program's 2s: only the words are asserted.
	assert.Regexp(t, `^exit code 1 after [0-9.]+m?s`, exits[0].Message)
}

// TestExecFloorAfterMinHealthy: the floor rises once the container has been
// healthy for min_healthy, and not before.
func TestExecFloorAfterMinHealthy(t *testing.T) {
	t.Parallel()
	const minHealthy = 1500 * time.Millisecond
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "http", "v1"))
	e := openExecAgent(t, t.TempDir(), reg)
	web := checked(mesh.Container{Module: "web", Digest: p.Digest, Generation: 3, Image: p.Image}, httpCheck(minHealthy))
	_, err := e.c.Apply(context.Background(), decl(1, web))
	require.NoError(t, err)

	rc := waitContainer(t, e.c, "web", "healthy", healthIs(mesh.HealthHealthy))
	since, err := time.Parse(time.RFC3339Nano, rc.HealthySince)
	require.NoError(t, err)
	// The floor is not in the report: no long poll announces it.
	execrttest.Eventually(t, waitLimit, "the floor rises", func() bool { _, ok := floorOf(e.a, "web"); return ok })
	es := journalOf(t, e.a)
	require.Equal(t, []string{"floor-raised 1", "healthy 1", "running 1", "applied 1"}, outcomes(es))
	assert.GreaterOrEqual(t, es[0].Time.Sub(since), minHealthy, "raised no sooner than min_healthy after it became healthy")
	assert.Contains(t, es[0].Message, "healthy since "+rc.HealthySince)
}

// TestExecFlapResetsHealthySince: a probe that fails and passes again
// makes the container healthy since the pass, not since before, and
// journals both turns, the failure with what the probe said.
func TestExecFlapResetsHealthySince(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "http", "v1"))
	e := openExecAgent(t, t.TempDir(), reg)
	fail := filepath.Join(t.TempDir(), "fail")
	web := checked(mesh.Container{Module: "web", Digest: p.Digest, Generation: 3, Image: p.Image,
		Env: map[string]string{"TESTAPP_FAIL_FILE": fail}}, httpCheck(time.Hour))
	_, err := e.c.Apply(context.Background(), decl(1, web))
	require.NoError(t, err)

	first := waitContainer(t, e.c, "web", "healthy", healthIs(mesh.HealthHealthy))
	require.NoError(t, os.WriteFile(fail, nil, 0o600))
	down := waitContainer(t, e.c, "web", "unhealthy", healthIs(mesh.HealthUnhealthy))
	assert.Empty(t, down.HealthySince)
	assert.Equal(t, 500, down.LastProbe.Status)
	assert.Contains(t, down.LastProbe.Output, "failing")
	require.NoError(t, os.Remove(fail))
	again := waitContainer(t, e.c, "web", "healthy again", healthIs(mesh.HealthHealthy))
	assert.Greater(t, again.HealthySince, first.HealthySince, "healthy_since starts again after the break")
	assert.Equal(t, mesh.StateRunning, again.State, "the process ran throughout")
	assert.Zero(t, again.Restarts)

	es := journalOf(t, e.a)
	assert.Equal(t, []string{"healthy 1", "unhealthy 1", "healthy 1", "running 1", "applied 1"}, outcomes(es))
	assert.Contains(t, es[1].Message, "http status 500: testapp v1 failing")
	_, raised := floorOf(e.a, "web")
	assert.False(t, raised)
}

// TestExecRestartsCounted: a process that is killed and restarted by the
// runtime counts a restart, breaks its health, and comes back on the same
// picked port.
func TestExecRestartsCounted(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "http", "v1"))
	dir := t.TempDir()
	e := openExecAgent(t, dir, reg)
	web := checked(mesh.Container{Module: "web", Digest: p.Digest, Generation: 3, Image: p.Image}, httpCheck(0))
	_, err := e.c.Apply(context.Background(), decl(1, web))
	require.NoError(t, err)
	first := waitContainer(t, e.c, "web", "healthy", healthIs(mesh.HealthHealthy))
	assert.Zero(t, first.Restarts)

	b, err := os.ReadFile(filepath.Join(dir, "logs", "web.log"))
	require.NoError(t, err)
	m := regexp.MustCompile(`started pid (\d+)`).FindSubmatch(b)
	require.NotNil(t, m, string(b))
	pid, _ := strconv.Atoi(string(m[1]))
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))

	broken := waitContainer(t, e.c, "web", "restarted", func(rc mesh.RunningContainer) bool { return rc.Restarts == 1 })
	assert.NotEqual(t, first.HealthySince, broken.HealthySince, "the restart broke it")
	again := waitContainer(t, e.c, "web", "healthy again", healthIs(mesh.HealthHealthy))
	assert.Equal(t, 1, again.Restarts)
	assert.Greater(t, again.HealthySince, first.HealthySince)

	es := journalOf(t, e.a)
	port := es[len(es)-1].Ports["web"]
	for _, en := range entries(es, OutcomeRunning) {
		assert.Equal(t, map[string]int{"web": port}, en.Ports, "the port stays the container's across restarts")
	}
	require.Len(t, entries(es, OutcomeExited), 1)
	assert.Contains(t, entries(es, OutcomeExited)[0].Message, "killed by signal 9")
}

// TestExecPortAutoTwoAgents: the same module on two machines of one box
// gets a port each, and both count healthy.
func TestExecPortAutoTwoAgents(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "http", "v1"))
	web := checked(mesh.Container{Module: "web", Digest: p.Digest, Generation: 3, Image: p.Image}, httpCheck(0))
	var ports []int
	for range 2 {
		dir := t.TempDir()
		e := openExecAgent(t, dir, reg)
		_, err := e.c.Apply(context.Background(), decl(1, web))
		require.NoError(t, err)
		waitContainer(t, e.c, "web", "healthy", healthIs(mesh.HealthHealthy))
		es := journalOf(t, e.a)
		port := es[len(es)-1].Ports["web"]
		require.NotZero(t, port)
		logHas(t, dir, fmt.Sprintf("serving 127.0.0.1:%d", port))
		ports = append(ports, port)
	}
	assert.NotEqual(t, ports[0], ports[1])
}
